#!/bin/sh
# docs/reference/settings.md is what gradwire-settings-doc prints from the
# table of settings (worker/settings_table.h).
# Usage: settings_reference_test.sh GRADWIRE_SETTINGS_DOC CHECKED_IN_FILE
set -eu
program=$1
checked_in=$2
printed=$(mktemp)
trap 'rm -f "$printed"' EXIT
"$program" > "$printed"
if ! diff -u "$checked_in" "$printed"; then
  echo "FAIL: $checked_in differs from what gradwire-settings-doc prints" \
       "(diff above). Regenerate it with: make settings-doc" >&2
  exit 1
fi
echo "OK: $checked_in is up to date"
