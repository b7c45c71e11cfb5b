// Builds the INVALID_ARGUMENT messages of SyncOptionsFromSettings
// (sync_settings.h), each starting with the setting's name as the front end
// spells it (--flag or keyword). Internal to worker/'s settings code.
//
// Thread safety: immutable after construction; holds a reference to the
// namer, which must outlive it.
#ifndef GRADWIRE_WORKER_SETTING_COMPLAINT_H_
#define GRADWIRE_WORKER_SETTING_COMPLAINT_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "worker/sync_settings.h"

namespace gradwire {

// Builds INVALID_ARGUMENT messages that start with a setting's name.
class Complaint {
 public:
  explicit Complaint(const SettingNamer& namer) : namer_(namer) {}

  template <typename... Args>
  absl::Status operator()(absl::string_view key,
                          const absl::FormatSpec<Args...>& format,
                          const Args&... args) const {
    return absl::InvalidArgumentError(
        absl::StrCat(namer_(key), ": ", absl::StrFormat(format, args...)));
  }

 private:
  const SettingNamer& namer_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SETTING_COMPLAINT_H_
