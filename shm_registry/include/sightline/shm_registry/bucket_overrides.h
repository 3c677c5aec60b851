// An instance's histogram bounds as its operator's choice (a flag such as
// --metrics-buckets FAMILY=b1,b2,...), for whatever histogram families the
// caller defines: parsing, registering them before any other process can
// attach, and checking that a joining process got the bounds it asked for.
//
// A family goes by its key: its name without a namespace prefix (the part up
// to the last ':'), so "app:latency_seconds" is "latency_seconds".
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/shm_registry/family_builder.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::metrics {

// Bounds chosen for an instance, by family key.
using BucketOverrides = std::map<std::string, std::vector<double>>;

// The most bounds one override may give.
inline constexpr std::size_t kMaxBucketBounds = 100;

std::string BucketOverrideKey(std::string_view family_name);
// The keys of `families`, in their order.
std::vector<std::string> BucketOverrideKeys(const std::vector<HistogramBuilder>& families);

// Parses one "FAMILY=b1,b2,..." into *overrides. Strict: FAMILY is the key
// of one of `families`, not given before; the bounds are 1 to
// kMaxBucketBounds finite numbers >= 0 (the families observe durations,
// counts and sizes) in strictly ascending order. The kInvalidArgument message
// names the rule broken, on one line, prefixed with `flag`.
Status ParseBucketOverride(std::string_view spec, const std::vector<HistogramBuilder>& families,
                           BucketOverrides* overrides, std::string_view flag = "--metrics-buckets");

// `families` with the overridden ones' bounds replaced.
std::vector<HistogramBuilder> WithBucketOverrides(std::vector<HistogramBuilder> families,
                                                  const BucketOverrides& overrides);

// Run by the process that creates an instance's registry, as
// Registry::Create's `init`: registers `families` (no series) so that every
// process of the instance adopts their bounds and none can register others.
Status RegisterHistograms(Registry* registry, const std::vector<HistogramBuilder>& families);

// For a process that joined an instance with overrides of its own: OK when
// the registry's bounds for each overridden family of `families` are those,
// else kInvalidArgument naming the first whose bounds the registry's creator
// chose otherwise.
Status CheckBucketsAdopted(Registry* registry, const std::vector<HistogramBuilder>& families,
                           const BucketOverrides& overrides,
                           std::string_view flag = "--metrics-buckets");

}  // namespace sightline::metrics
