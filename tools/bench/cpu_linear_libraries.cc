// The linear layers of one decode step of the 134M-parameter Llama
// (cpu_decode_bench's model: dim 768, FFN 2048, 12 layers, vocab 32000) run
// through every CPU matrix library Debian offers, side by side, at batch
// (rows) 1, 4, 16 and 64: the measurement that chose Sightline's CPU linear
// path (kernels/cpu/linear.cc; results in tools/bench/PERFORMANCE.md).
//
// Not part of the build (BLIS is not a dependency of the product);
// tools/bench/cpu_linear_libraries.sh installs nothing, builds it against
// build/kernels and runs it.
//
// Each configuration: passes over all 85 matrices (out = a * W^T, W
// [out features, in features] as the checkpoint stores it), repeated for at
// least 0.3 s, 3 times; the median pass is reported as rows/s (a decode step
// of `rows` sequences), GFLOP/s and weight GB/s.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blas.h"  // kernels/cpu: Sightline's OpenBLAS handle
#include "blis.h"
#include "omp.h"
#include "sightline/kernels/cpu_linear.h"

namespace {

namespace cpu = sightline::kernels::cpu;

struct Matrix {
  int rows, cols;  // out, in
  std::vector<float> w;
};

std::vector<Matrix> DecodeStepMatrices() {
  std::vector<Matrix> m;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto add = [&](int rows, int cols) {
    Matrix x{rows, cols, std::vector<float>(static_cast<std::size_t>(rows) * cols)};
    for (float& v : x.w) v = u(rng);
    m.push_back(std::move(x));
  };
  for (int l = 0; l < 12; ++l) {
    for (int i = 0; i < 4; ++i) add(768, 768);  // q, k, v, o
    add(2048, 768);                             // gate
    add(2048, 768);                             // up
    add(768, 2048);                             // down
  }
  add(32000, 768);  // output layer
  return m;
}

double Params(const std::vector<Matrix>& ms) {
  double p = 0;
  for (const Matrix& m : ms) p += static_cast<double>(m.rows) * m.cols;
  return p;
}

// Median seconds per call of `pass`.
double TimePass(const std::function<void()>& pass) {
  pass();  // warm up (first-touch, library setup)
  std::vector<double> runs;
  for (int r = 0; r < 3; ++r) {
    int n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
      pass();
      ++n;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < 0.3);
    runs.push_back(s / n);
  }
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

void Report(const char* name, int rows, double seconds, double params, double weight_bytes) {
  std::printf("%-26s rows %2d: %8.1f rows/s %7.1f GFLOP/s %6.1f GB/s of weights\n", name, rows,
              rows / seconds, 2 * params * rows / seconds / 1e9, weight_bytes / seconds / 1e9);
  std::fflush(stdout);
}

// oneDNN matmul out[rows, n] = a[rows, k] * W^T with the weights reordered
// once into the layout the primitive asks for (format "any"), in `wdt`.
struct DnnlLayer {
  dnnl::matmul prim;
  dnnl::memory src, wei, dst;
};

// Variants: weights in oneDNN's preferred (blocked) layout or as the
// checkpoint has them ([n, k] row-major, "ba"); rows fixed per primitive or
// a run-time dimension (one primitive for every batch size).
struct DnnlVariant {
  bool plain_weights = false, runtime_rows = false;
};

DnnlLayer MakeDnnlLayer(const dnnl::engine& eng, dnnl::stream& st, const Matrix& m, int rows,
                        dnnl::memory::data_type sdt, dnnl::memory::data_type wdt, DnnlVariant v) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dim k = m.cols, n = m.rows;
  const dnnl::memory::dim mrows = v.runtime_rows ? DNNL_RUNTIME_DIM_VAL : rows;
  dnnl::memory::desc src_md({mrows, k}, sdt, tag::ab);
  dnnl::memory::desc wei_md({k, n}, wdt, v.plain_weights ? tag::ba : tag::any);
  dnnl::memory::desc dst_md({mrows, n}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  if (wdt == dt::s8) attr.set_output_scales(1 << 1, std::vector<float>(n, 1.0f / 127));
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, eng);
  auto concrete = [&](dnnl::memory::dim cols, dnnl::memory::data_type t) {
    return dnnl::memory::desc({rows, cols}, t, tag::ab);
  };
  DnnlLayer l{dnnl::matmul(pd),
              dnnl::memory(v.runtime_rows ? concrete(k, sdt) : pd.src_desc(), eng),
              dnnl::memory(pd.weights_desc(), eng),
              dnnl::memory(v.runtime_rows ? concrete(n, dt::f32) : pd.dst_desc(), eng)};
  // The checkpoint's [n, k] row-major is [k, n] in "ba".
  if (wdt == dt::s8) {
    std::vector<std::int8_t> q(m.w.size());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(m.w[i] * 2540);
    dnnl::memory user({{k, n}, dt::s8, tag::ba}, eng, q.data());
    dnnl::reorder(user, l.wei).execute(st, user, l.wei);
    std::fill_n(static_cast<std::uint8_t*>(l.src.get_data_handle()), rows * k, 100);
  } else {
    dnnl::memory user({{k, n}, dt::f32, tag::ba}, eng, const_cast<float*>(m.w.data()));
    dnnl::reorder(user, l.wei).execute(st, user, l.wei);
    std::vector<float> a(static_cast<std::size_t>(rows * k), 0.5f);
    dnnl::memory user_src({{rows, k}, dt::f32, tag::ab}, eng, a.data());
    dnnl::reorder(user_src, l.src).execute(st, user_src, l.src);
  }
  st.wait();
  return l;
}

void RunDnnl(const char* name, const std::vector<Matrix>& ms, int rows, dnnl::memory::data_type sdt,
             dnnl::memory::data_type wdt, double bytes_per_weight, DnnlVariant v = {}) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::vector<DnnlLayer> layers;
  for (const Matrix& m : ms) layers.push_back(MakeDnnlLayer(eng, st, m, rows, sdt, wdt, v));
  const double s = TimePass([&] {
    for (DnnlLayer& l : layers)
      l.prim.execute(st, {{DNNL_ARG_SRC, l.src}, {DNNL_ARG_WEIGHTS, l.wei}, {DNNL_ARG_DST, l.dst}});
    st.wait();
  });
  Report(name, rows, s, Params(ms), Params(ms) * bytes_per_weight);
}

void RunSightline(const char* name, const std::vector<Matrix>& ms, int rows,
                  cpu::WeightFormat format) {
  std::vector<cpu::Linear> layers;
  for (const Matrix& m : ms) layers.emplace_back(m.w.data(), m.rows, m.cols, format);
  std::vector<float> a(static_cast<std::size_t>(rows) * 2048, 0.5f), out(32000 * 64);
  const double s = TimePass([&] {
    for (const cpu::Linear& l : layers) l.Apply(a.data(), rows, out.data());
  });
  Report(name, rows, s, Params(ms), Params(ms) * cpu::WeightFormatBytes(format));
}

}  // namespace

std::vector<int> RowCounts() {
  const char* env = std::getenv("ROWS");  // e.g. ROWS=2,8
  if (env == nullptr) return {1, 4, 16, 64};
  std::vector<int> r;
  for (const char* p = env; *p != 0;) {
    char* end = nullptr;
    r.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
  }
  return r;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  cpu::InitCpuKernels();  // before any thread: it sets OpenBLAS's environment
  omp_set_num_threads(threads);
  bli_thread_set_num_threads(threads);
  std::printf("%d threads; Sightline: %s\n", threads, cpu::DescribeCpuKernels().c_str());
  const std::vector<Matrix> ms = DecodeStepMatrices();
  const double params = Params(ms);
  std::printf("%.1fM weights per pass\n", params / 1e6);
  std::vector<float> a(64 * 2048, 0.5f), out(32000 * 64);
  using dt = dnnl::memory::data_type;
  for (int rows : RowCounts()) {
    RunSightline("sightline float32", ms, rows, cpu::WeightFormat::kFloat32);
    RunSightline("sightline bfloat16", ms, rows, cpu::WeightFormat::kBFloat16);
    RunSightline("sightline int8 (weights)", ms, rows, cpu::WeightFormat::kInt8);
    // OpenBLAS as Sightline calls it above 4 rows: one sgemm per thread slice
    // is what Linear does; here one call with OpenBLAS's own threads off, so
    // 1-thread figures compare like with like.
    if (threads == 1) {
      const cpu::Blas& blas = cpu::OpenBlas();
      Report("openblas sgemm", rows, TimePass([&] {
               for (const Matrix& m : ms)
                 blas.sgemm_nt(rows, m.rows, m.cols, a.data(), m.cols, m.w.data(), m.cols,
                               out.data(), m.rows);
             }),
             params, params * 4);
    }
    Report("blis sgemm", rows, TimePass([&] {
             float one = 1, zero = 0;
             for (const Matrix& m : ms)
               bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, rows, m.rows, m.cols, &one, a.data(),
                         m.cols, 1, const_cast<float*>(m.w.data()), 1, m.cols, &zero, out.data(),
                         m.rows, 1);
           }),
           params, params * 4);
    if (rows == 1)
      Report("blis sgemv", rows, TimePass([&] {
               float one = 1, zero = 0;
               for (const Matrix& m : ms)
                 bli_sgemv(BLIS_NO_TRANSPOSE, BLIS_NO_CONJUGATE, m.rows, m.cols, &one,
                           const_cast<float*>(m.w.data()), m.cols, 1, a.data(), 1, &zero,
                           out.data(), 1);
             }),
             params, params * 4);
    RunDnnl("onednn f32", ms, rows, dt::f32, dt::f32, 4);
    RunDnnl("onednn f32 plain", ms, rows, dt::f32, dt::f32, 4, {true, false});
    RunDnnl("onednn f32 plain runtime", ms, rows, dt::f32, dt::f32, 4, {true, true});
    RunDnnl("onednn bf16 (bf16 act.)", ms, rows, dt::bf16, dt::bf16, 2);
    RunDnnl("onednn bf16 plain", ms, rows, dt::bf16, dt::bf16, 2, {true, false});
    RunDnnl("onednn bf16 plain runtime", ms, rows, dt::bf16, dt::bf16, 2, {true, true});
    RunDnnl("onednn s8 (u8 act.)", ms, rows, dt::u8, dt::s8, 1);
  }
}
