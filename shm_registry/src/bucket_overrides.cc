#include "sightline/shm_registry/bucket_overrides.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "sightline/shm_registry/exposition.h"

namespace sightline::metrics {

namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::string BucketOverrideKey(std::string_view family_name) {
  const std::size_t colon = family_name.rfind(':');
  return std::string(colon == std::string_view::npos ? family_name : family_name.substr(colon + 1));
}

std::vector<std::string> BucketOverrideKeys(const std::vector<HistogramBuilder>& families) {
  std::vector<std::string> out;
  for (const HistogramBuilder& f : families) out.push_back(BucketOverrideKey(f.name()));
  return out;
}

Status ParseBucketOverride(std::string_view spec, const std::vector<HistogramBuilder>& families,
                           BucketOverrides* overrides, std::string_view flag) {
  const std::string where = std::string(flag) + " '" + std::string(spec) + "': ";
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Status::InvalidArgument(where + "expected FAMILY=b1,b2,...");
  const std::string family(spec.substr(0, eq));
  const std::vector<std::string> known = BucketOverrideKeys(families);
  if (std::find(known.begin(), known.end(), family) == known.end()) {
    const std::size_t colon = family.rfind(':');
    if (colon != std::string::npos &&
        std::find(known.begin(), known.end(), family.substr(colon + 1)) != known.end())
      return Status::InvalidArgument(where + "name the family without its prefix ('" +
                                     family.substr(colon + 1) + "')");
    return Status::InvalidArgument(where + "'" + family +
                                   "' is not a histogram family; one of: " + Join(known));
  }
  if (overrides->count(family))
    return Status::InvalidArgument(where + family + " is given more than once");
  std::vector<double> bounds;
  std::string_view list = spec.substr(eq + 1);
  if (list.empty()) return Status::InvalidArgument(where + "no bounds");
  for (std::size_t pos = 0; pos <= list.size();) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view item = list.substr(pos, comma - pos);
    // from_chars takes no leading '+'; "+2" is a number to an operator.
    const std::string_view digits = item.starts_with('+') ? item.substr(1) : item;
    double v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc::result_out_of_range)
      return Status::InvalidArgument(where + "'" + std::string(item) + "' is out of range");
    const bool two_signs = digits.size() < item.size() && digits.starts_with('-');  // "+-2"
    if (digits.empty() || two_signs || ec != std::errc() || end != digits.data() + digits.size())
      return Status::InvalidArgument(where + "'" + std::string(item) + "' is not a number");
    if (!std::isfinite(v))
      return Status::InvalidArgument(where + "'" + std::string(item) +
                                     "' is not finite (+Inf is always the last bucket)");
    if (v < 0)
      return Status::InvalidArgument(where + "'" + std::string(item) +
                                     "' is negative (no family observes a value below 0)");
    if (!bounds.empty() && !(v > bounds.back()))
      return Status::InvalidArgument(where + "bounds must be strictly ascending (" +
                                     FormatDouble(v) + " after " + FormatDouble(bounds.back()) +
                                     ")");
    bounds.push_back(v);
    pos = comma + 1;
  }
  // Each bound is a cell per series in every process: a bounded count keeps
  // a start that passes --dry-run inside the registry's default capacity
  // (vLLM's longest list has 22).
  if (bounds.size() > kMaxBucketBounds)
    return Status::InvalidArgument(where + std::to_string(bounds.size()) + " bounds; at most " +
                                   std::to_string(kMaxBucketBounds));
  (*overrides)[family] = std::move(bounds);
  return Status::Ok();
}

std::vector<HistogramBuilder> WithBucketOverrides(std::vector<HistogramBuilder> families,
                                                  const BucketOverrides& overrides) {
  for (HistogramBuilder& f : families)
    if (auto it = overrides.find(BucketOverrideKey(f.name())); it != overrides.end())
      f.Buckets(it->second);
  return families;
}

Status RegisterHistograms(Registry* r, const std::vector<HistogramBuilder>& families) {
  for (const HistogramBuilder& f : families) {
    HistogramFamily fam;
    if (Status s = f.Register(r, &fam); !s.ok()) return s;
  }
  return Status::Ok();
}

Status CheckBucketsAdopted(Registry* r, const std::vector<HistogramBuilder>& families,
                           const BucketOverrides& overrides, std::string_view flag) {
  for (const HistogramBuilder& f : families) {
    const std::string key = BucketOverrideKey(f.name());
    auto it = overrides.find(key);
    if (it == overrides.end()) continue;
    std::vector<double> have;
    if (Status s = r->HistogramBounds(f.name(), &have); !s.ok()) return s;
    if (have != it->second)
      return Status::InvalidArgument(
          std::string(flag) + " " + key + ": registry '" + r->instance() +
          "' already has other bounds for it (its creator's); give the flag to the process that "
          "creates the registry");
  }
  return Status::Ok();
}

}  // namespace sightline::metrics
