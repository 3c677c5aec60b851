#include "instance/instance_histograms.h"

#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/engine_core/engine_families.h"

namespace sightline::cli {

std::vector<metrics::HistogramBuilder> InstanceHistogramDefaults(std::uint32_t max_model_len,
                                                                 bool kv_cache_metrics) {
  std::vector<metrics::HistogramBuilder> out = api::RequestFamilies::Histograms(max_model_len);
  for (auto& h : engine::EngineFamilies::Histograms(kv_cache_metrics)) out.push_back(std::move(h));
  for (auto& h : api::HttpFamilies::Histograms()) out.push_back(std::move(h));
  return out;
}

}  // namespace sightline::cli
