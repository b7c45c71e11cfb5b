"""Progress on the terminal: a bar that redraws itself on a terminal, a
line every 5 s otherwise (as gradwire-worker)."""

import sys
import time


def human_bytes(count):
    value, unit = float(count), 0
    units = ("B", "kB", "MB", "GB", "TB")
    while value >= 1000.0 and unit < len(units) - 1:
        value /= 1000.0
        unit += 1
    return f"{int(count)} B" if unit == 0 else f"{value:.1f} {units[unit]}"


class Progress:
    def __init__(self, label, mode):
        self.label = label
        self.quiet = mode == "none"
        self.bar = mode == "bar" or (mode == "auto" and sys.stdout.isatty())
        self.interval = 0.1 if self.bar else 5.0
        self.last_draw = float("-inf")
        self.bar_open = False

    def update(self, epoch, epochs, step, steps, loss, samples_per_second,
               pushed, dense):
        now = time.monotonic()
        if self.quiet or (now - self.last_draw < self.interval
                          and step != steps):
            return
        self.last_draw = now
        text = (f"{self.label} epoch {epoch + 1}/{epochs} step {step}/{steps} "
                f"loss {loss:.4f} {samples_per_second:.0f} samples/s sent "
                f"{human_bytes(pushed)} of {human_bytes(dense)} dense "
                f"({dense / pushed if pushed else 0:.0f}x less)")
        if self.bar:
            filled = 24 * step // steps if steps else 0
            print(f"\r\033[K[{'#' * filled}{'.' * (24 - filled)}] {text}",
                  end="", flush=True)
            self.bar_open = True
        else:
            print(text, flush=True)

    def line(self, text):
        if self.quiet:
            return
        if self.bar_open:
            print()
            self.bar_open = False
        print(f"{self.label} {text}", flush=True)
