#include "onednn_matmul.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sightline::kernels::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// The one CPU engine: oneDNN engines are thread-safe and meant to be shared;
// immutable after its first use.
const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One slice width's product and the scratch memory it asks for. The
// scratchpad is the caller's ("user" mode): in oneDNN's default mode a
// primitive must run on the thread that made it and never on two at once,
// and here any thread of the team runs any slice.
struct Primitive {
  dnnl::matmul matmul;
  dnnl::memory::desc scratchpad;
};

// out[m, width] (row stride n) = a[m, k] * W_slice^T, any m.
Primitive MakePrimitive(int width, int n, int k, dt t) {
  const dnnl::memory::desc src({DNNL_RUNTIME_DIM_VAL, k}, t, tag::ab);
  const dnnl::memory::desc wei({k, width}, t, tag::ba);  // W [width, k] row-major is W^T in "ba"
  const dnnl::memory::desc dst({DNNL_RUNTIME_DIM_VAL, width}, dt::f32, dnnl::memory::dims{n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, Engine());
  return Primitive{dnnl::matmul(pd), pd.scratchpad_desc()};
}

}  // namespace

struct OneDnnMatmul::Impl {
  int n, k;
  dt type;
  std::mutex mu;  // guards by_width
  std::map<int, Primitive> by_width;

  const Primitive& For(int width) {
    const std::lock_guard<std::mutex> lock(mu);
    auto it = by_width.find(width);
    if (it == by_width.end()) it = by_width.emplace(width, MakePrimitive(width, n, k, type)).first;
    return it->second;
  }
};

OneDnnMatmul::OneDnnMatmul(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnMatmul::~OneDnnMatmul() = default;

std::unique_ptr<OneDnnMatmul> OneDnnMatmul::Make(int n, int k, Weights type) {
  auto impl = std::make_unique<Impl>();
  impl->n = n;
  impl->k = k;
  impl->type = type == Weights::kBFloat16 ? dt::bf16 : dt::f32;
  try {
    impl->For(n);  // the whole matrix (one thread); fails where oneDNN lacks the product
  } catch (const dnnl::error&) {
    return nullptr;  // e.g. bfloat16 on a CPU without AVX-512
  }
  return std::unique_ptr<OneDnnMatmul>(new OneDnnMatmul(std::move(impl)));
}

void OneDnnMatmul::Run(const void* src, int m, const void* w, float* out,
                       int rows_per_slice) const {
  Impl& p = *impl_;
  const std::size_t weight_bytes = p.type == dt::bf16 ? sizeof(BFloat16) : sizeof(float);
  const int slices = (p.n + rows_per_slice - 1) / rows_per_slice;
#pragma omp parallel for schedule(static) num_threads(slices)
  for (int s = 0; s < slices; ++s) {
    // oneDNN runs a product on omp_get_max_threads() threads unless it is
    // called inside an active parallel region, which a region of one thread
    // is not: one thread, whatever the team.
    omp_set_num_threads(1);
    const int r0 = s * rows_per_slice, width = std::min(rows_per_slice, p.n - r0);
    const Primitive& prim = p.For(width);
    // Each thread's scratch memory, kept across calls (sized by the
    // primitive; matmul asks for none or little).
    static thread_local std::vector<unsigned char> scratch;
    scratch.resize(std::max<std::size_t>(scratch.size(), prim.scratchpad.get_size()));
    const char* wbytes =
        static_cast<const char*>(w) + static_cast<std::size_t>(r0) * p.k * weight_bytes;
    dnnl::memory src_mem({{m, p.k}, p.type, tag::ab}, Engine(), const_cast<void*>(src));
    dnnl::memory wei_mem({{p.k, width}, p.type, tag::ba}, Engine(), const_cast<char*>(wbytes));
    dnnl::memory dst_mem({{m, width}, dt::f32, dnnl::memory::dims{p.n, 1}}, Engine(), out + r0);
    dnnl::stream stream(Engine());
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    if (prim.scratchpad.get_size() > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(prim.scratchpad, Engine(), scratch.data()));
    prim.matmul.execute(stream, args);
    stream.wait();
  }
}

std::string DescribeOneDnn() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    default:
      isa = "other";
      break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" + isa + ")";
}

}  // namespace sightline::kernels::cpu
