"""Builds gradwire._C with the project's CMake build, for `pip install`.

The extension is built against the torch that the interpreter running pip
imports (pip needs --no-build-isolation, or that torch is hidden), by the
CMake build of the repository that holds this folder. Environment:

  GRADWIRE_CMAKE_BUILD_DIR  an absolute path: a configured build directory
                            is reused as it is (nothing compiles twice);
                            an empty one is configured as below. Default:
                            a build of its own under
                            <repository>/build-python/.
  GRADWIRE_CMAKE_ARGS       more arguments for the configure step, such as
                            -DGRADWIRE_CUDA=ON.
"""

import hashlib
import importlib.util
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
ROOT = PACKAGE_DIR.parent
HINT = "scripts/install-deps.sh installs what the build needs"


def fail(message):
    """Stops the build with `message`, which pip shows without a traceback."""
    sys.exit(f"error: {message}")


def project_version():
    cmake_lists = ROOT / "CMakeLists.txt"
    if not cmake_lists.is_file():
        fail(f"{cmake_lists} is missing: install gradwire from a checkout "
             "of the repository (pip install ./python)")
    match = re.search(r"project\(gradwire\s+VERSION\s+([0-9.]+)",
                      cmake_lists.read_text())
    if not match:
        fail(f"{cmake_lists}: no `project(gradwire VERSION ...)`")
    return match.group(1)


def own_build_dir():
    """<repository>/build-python/<Python ABI>-<torch>: one per interpreter
    kind and torch, so that a build never meets another torch's cache."""
    abi = sysconfig.get_config_var("EXT_SUFFIX").strip(".").removesuffix(
        ".so")
    torch_path = importlib.util.find_spec("torch").origin
    torch_key = hashlib.sha1(torch_path.encode()).hexdigest()[:8]
    return ROOT / "build-python" / f"{abi}-torch-{torch_key}"


def cmake_build_dir():
    given = os.environ.get("GRADWIRE_CMAKE_BUILD_DIR")
    if not given:
        return own_build_dir()
    if not os.path.isabs(given):
        # pip runs this from a folder of its choosing, so a relative path
        # would be read against that.
        fail(
            f"GRADWIRE_CMAKE_BUILD_DIR must be an absolute path, got {given}")
    return pathlib.Path(given)


def cache_entry(build_dir, name):
    """The value of `name` in build_dir's CMakeCache.txt, or None."""
    text = (build_dir / "CMakeCache.txt").read_text()
    match = re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.MULTILINE)
    return match.group(1) if match else None


# What a build for this interpreter must match: the extension's file name
# suffix (Python version and ABI) and the torch it imports.
IDENTITY = ("import sysconfig, torch; "
            "print(sysconfig.get_config_var('EXT_SUFFIX'), torch.__file__)")


def interpreter_identity(python):
    result = subprocess.run([python, "-c", IDENTITY], capture_output=True,
                            text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def check_build_environment():
    """Fails early, before pip's later steps hide the cause: without torch
    (an isolated build, or a virtualenv without the system's packages) and
    without wheel (setuptools before 70 needs it to make the wheel)."""
    if importlib.util.find_spec("torch") is None:
        fail(
            f"{sys.executable} has no torch: gradwire._C is built "
            "against the torch of the interpreter that runs pip. Install "
            "torch for it (Debian: apt-get install python3-torch, and a "
            "virtualenv made with --system-site-packages) and run pip with "
            f"--no-build-isolation; {HINT}")
    if importlib.util.find_spec("wheel") is None:
        fail(f"{sys.executable} has no `wheel` module (Debian: "
             f"apt-get install python3-wheel); {HINT}")


def torch_cmake_args():
    import torch.utils
    # Debian's torch has no CMake files of its own (libtorch-dev's are
    # found in the system folders); pip's torch wheels do.
    prefix = pathlib.Path(torch.utils.cmake_prefix_path)
    return [f"-DCMAKE_PREFIX_PATH={prefix}"] if prefix.is_dir() else []


def require_program(name, package):
    if shutil.which(name) is None:
        fail(f"`{name}` is not on PATH: building gradwire._C needs it "
             f"(apt-get install {package}); {HINT}")


def configure(build_dir, torch_args):
    build_dir.mkdir(parents=True, exist_ok=True)
    # Only what gradwire._C needs: no programs, tests, benchmarks, fuzzers
    # or CUDA kernels (Debian's torch is CPU-only; GRADWIRE_CMAKE_ARGS can
    # pass -DGRADWIRE_CUDA=ON for a CUDA torch).
    extra = shlex.split(os.environ.get("GRADWIRE_CMAKE_ARGS", ""))
    run_cmake([
        "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DGRADWIRE_PYTHON={sys.executable}",
        "-DGRADWIRE_PYTHON_BINDINGS=ON",
        "-DGRADWIRE_BUILD_PROGRAMS=OFF", "-DGRADWIRE_BUILD_TESTS=OFF",
        "-DGRADWIRE_BUILD_BENCHMARKS=OFF", "-DGRADWIRE_BUILD_FUZZERS=OFF",
        "-DGRADWIRE_CUDA=OFF",
    ] + torch_args + extra)


def check_reused(build_dir):
    """A reused build must be for an interpreter with this one's Python ABI
    and torch; it is not reconfigured, so that nothing recompiles."""
    if cache_entry(build_dir, "GRADWIRE_PYTHON_BINDINGS") == "OFF":
        fail(f"{build_dir} was configured with GRADWIRE_PYTHON_BINDINGS=OFF")
    python = cache_entry(build_dir, "GRADWIRE_PYTHON")
    ours = interpreter_identity(sys.executable)
    if python is None or interpreter_identity(python) != ours:
        fail(f"{build_dir} builds gradwire._C for {python}, whose Python or "
             f"torch differ from those of {sys.executable} ({ours}); unset "
             "GRADWIRE_CMAKE_BUILD_DIR for a build of its own")


def run_cmake(args):
    try:
        subprocess.run(["cmake"] + args, check=True)
    except subprocess.CalledProcessError as error:
        fail(f"`cmake {' '.join(args)}` failed (exit {error.returncode}); "
             f"see its output above; {HINT}")


class CMakeBuild(build_ext):
    """Builds the target gradwire_python and copies _C next to the
    pure-Python modules."""

    def build_extension(self, ext):
        torch_args = torch_cmake_args()
        require_program("cmake", "cmake")
        require_program("ninja", "ninja-build")
        build_dir = cmake_build_dir()
        if "GRADWIRE_CMAKE_BUILD_DIR" in os.environ and (
                build_dir / "CMakeCache.txt").is_file():
            check_reused(build_dir)
        else:
            # Our own build is configured again on each install: cheap when
            # nothing changed, and it records this interpreter (a new
            # virtualenv).
            configure(build_dir, torch_args)
        run_cmake(["--build", str(build_dir), "--target", "gradwire_python"])
        built = build_dir / "python" / "gradwire" / (
            "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not built.is_file():
            fail(f"{built} was not built: {build_dir} was configured for "
                 "another Python")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)
        check_loads(target)


def check_loads(path):
    """Loads the copied extension in a fresh interpreter after torch, as
    `import gradwire` will: an ABI mismatch with this torch fails here."""
    load = ("import importlib.util, sys, torch\n"
            "spec = importlib.util.spec_from_file_location("
            "'gradwire._C', sys.argv[1])\n"
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n")
    result = subprocess.run([sys.executable, "-c", load, str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"the built {path.name} does not load with this interpreter's "
             f"torch:\n{result.stderr}")


check_build_environment()
# setuptools' own files go beside the CMake build, outside the source tree.
SETUPTOOLS_DIR = cmake_build_dir() / "setuptools"
SETUPTOOLS_DIR.mkdir(parents=True, exist_ok=True)
setup(
    version=project_version(),
    packages=["gradwire"],
    package_data={"gradwire": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("gradwire._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": str(SETUPTOOLS_DIR)},
             "egg_info": {"egg_base": str(SETUPTOOLS_DIR)}},
)
