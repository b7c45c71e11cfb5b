// The Python face of the table of settings (worker/settings_table.h):
// gradwire.ParameterSync's keywords, their type checks and docstring, and
// gradwire.settings().
//
// Thread safety: every function needs the GIL.
#ifndef GRADWIRE_PYTHON_PY_SETTINGS_H_
#define GRADWIRE_PYTHON_PY_SETTINGS_H_

#include <pybind11/pybind11.h>

#include <string>

#include "worker/sync_settings.h"

namespace gradwire {

// SyncSettings from ParameterSync's keywords: each keyword is a setting
// with kPythonKeyword, converted to the setting's type. Raises TypeError
// naming the keyword and the nearest known one for an unknown keyword,
// naming the keyword and the expected type for a value of another type,
// and for a missing "shards". Values are checked by SyncOptionsFromSettings.
SyncSettings SettingsFromKeywords(const pybind11::kwargs& keywords);

// The docstring section listing every keyword setting by group: name,
// type, default and help (help's "--flag-name" written "flag_name").
std::string KeywordSettingsDoc();

// gradwire.settings(): one dict per setting, in table order, with "name",
// "type" ("bool", "int", "float", "str", "list[str]"), "default" (a Python
// value), "group", "help" (the table's, naming others as --flag-name),
// "choices" (list of str, empty for any), "min", "max" (float or None),
// "min_open", "max_open", "conditional", "flag" (the gradwire-worker flag,
// "--name-x"), "keyword" (bool) and "environment" (the variable's name, or
// None).
pybind11::list SettingsAsPython();

}  // namespace gradwire

#endif  // GRADWIRE_PYTHON_PY_SETTINGS_H_
