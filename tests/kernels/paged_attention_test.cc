// The CPU's paged attention (cpu_ops.h) against attention worked out in
// double from the same cache, over scattered block tables, grouped-query
// heads, prefill and decode rows in one batch, sliding windows and softcaps;
// and the same result on one thread as on two.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "sightline/kernels/cpu_ops.h"

namespace sightline::kernels::cpu {
namespace {

struct Shape {
  int heads, kv_heads, head_dim, block_size, window;
  float softcap;
};

struct Batch {
  Shape shape;
  std::vector<std::int32_t> query_start, context_len, block_tables;
  int max_blocks = 0;
  std::vector<float> q, k_cache, v_cache;

  PagedAttentionArgs Args(float* out) const {
    PagedAttentionArgs a{};
    a.q = q.data();
    a.k_cache = k_cache.data();
    a.v_cache = v_cache.data();
    a.num_heads = shape.heads;
    a.num_kv_heads = shape.kv_heads;
    a.head_dim = shape.head_dim;
    a.block_size = shape.block_size;
    a.num_seqs = static_cast<int>(context_len.size());
    a.query_start = query_start.data();
    a.context_len = context_len.data();
    a.block_tables = block_tables.data();
    a.max_blocks_per_seq = max_blocks;
    a.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    a.out = out;
    a.sliding_window = shape.window;
    a.softcap = shape.softcap;
    return a;
  }
};

// Sequences of the given (query rows, context) lengths, their blocks
// shuffled over the cache.
Batch MakeBatch(const Shape& s, const std::vector<std::pair<int, int>>& seqs, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Batch b{s, {0}, {}, {}, 0, {}, {}, {}};
  int blocks = 0;
  for (const auto& [rows, ctx] : seqs) {
    b.query_start.push_back(b.query_start.back() + rows);
    b.context_len.push_back(ctx);
    b.max_blocks = std::max(b.max_blocks, (ctx + s.block_size - 1) / s.block_size);
  }
  std::vector<std::int32_t> order(seqs.size() * b.max_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  b.block_tables = order;
  blocks = static_cast<int>(order.size());
  const std::size_t kv_row = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  b.k_cache.resize(static_cast<std::size_t>(blocks) * s.block_size * kv_row);
  b.v_cache.resize(b.k_cache.size());
  for (float& x : b.k_cache) x = normal(rng);
  for (float& x : b.v_cache) x = normal(rng);
  b.q.resize(static_cast<std::size_t>(b.query_start.back()) * s.heads * s.head_dim);
  for (float& x : b.q) x = normal(rng);
  return b;
}

// out for one query row and head, in double.
std::vector<double> Reference(const Batch& b, int seq, int row, int head) {
  const Shape& s = b.shape;
  const int pos = b.context_len[seq] - (b.query_start[seq + 1] - row);
  const int first = s.window > 0 ? std::max(0, pos - s.window + 1) : 0;
  const int kvh = head / (s.heads / s.kv_heads);
  const std::size_t kv_row = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  auto at = [&](const std::vector<float>& cache, int p, int d) {
    const std::size_t slot =
        static_cast<std::size_t>(b.block_tables[seq * b.max_blocks + p / s.block_size]) *
            s.block_size +
        p % s.block_size;
    return static_cast<double>(cache[slot * kv_row + kvh * s.head_dim + d]);
  };
  const float* q = b.q.data() + (static_cast<std::size_t>(row) * s.heads + head) * s.head_dim;
  std::vector<double> score;
  for (int p = first; p <= pos; ++p) {
    double dot = 0;
    for (int d = 0; d < s.head_dim; ++d) dot += q[d] * at(b.k_cache, p, d);
    double x = dot / std::sqrt(static_cast<double>(s.head_dim));
    if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
    score.push_back(x);
  }
  const double top = *std::max_element(score.begin(), score.end());
  double denom = 0;
  for (double& x : score) denom += (x = std::exp(x - top));
  std::vector<double> out(static_cast<std::size_t>(s.head_dim), 0.0);
  for (int p = first; p <= pos; ++p)
    for (int d = 0; d < s.head_dim; ++d)
      out[static_cast<std::size_t>(d)] +=
          score[static_cast<std::size_t>(p - first)] / denom * at(b.v_cache, p, d);
  return out;
}

std::vector<float> Attend(const Batch& b, int threads) {
  std::vector<float> out(b.q.size(), NAN);
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  PagedAttention(b.Args(out.data()));
  omp_set_num_threads(before);
  return out;
}

TEST(PagedAttentionCpu, MatchesAttentionInDoubleOnEveryShape) {
  const Shape shapes[] = {
      {4, 4, 16, 4, 0, 0},    {8, 2, 64, 16, 0, 0},  {6, 1, 80, 8, 0, 0},
      {12, 12, 64, 16, 5, 0}, {8, 4, 128, 4, 0, 30}, {2, 2, 7, 3, 3, 20},
      {32, 8, 64, 16, 0, 0},  {12, 4, 64, 16, 0, 0}, {7, 7, 32, 8, 0, 0},
  };
  // (query rows, context): decodes, a prefill, a prefill on a cached prefix
  // in one batch; and one sequence alone, whose heads are split in ranges
  // (two per thread), differently on one thread than on two.
  const std::vector<std::vector<std::pair<int, int>>> batches = {
      {{1, 1}, {1, 37}, {9, 9}, {5, 70}, {1, 144}}, {{1, 100}}, {{7, 40}}};
  std::uint32_t seed = 1;
  for (const Shape& s : shapes)
    for (const auto& seqs : batches) {
      const Batch b = MakeBatch(s, seqs, seed++);
      const std::vector<float> one = Attend(b, 1), two = Attend(b, 2);
      EXPECT_EQ(one, two) << "heads " << s.heads;  // each (row, head) summed by one thread
      for (int seq = 0; seq < static_cast<int>(seqs.size()); ++seq)
        for (int row = b.query_start[seq]; row < b.query_start[seq + 1]; ++row)
          for (int h = 0; h < s.heads; ++h) {
            const std::vector<double> want = Reference(b, seq, row, h);
            for (int d = 0; d < s.head_dim; ++d)
              ASSERT_NEAR(one[(static_cast<std::size_t>(row) * s.heads + h) * s.head_dim + d],
                          want[static_cast<std::size_t>(d)], 1e-5)
                  << "heads " << s.heads << "/" << s.kv_heads << " dim " << s.head_dim << " window "
                  << s.window << " softcap " << s.softcap << " seq " << seq << " row " << row
                  << " head " << h << " d " << d;
          }
    }
}

TEST(PagedAttentionCpu, AnEmptyBatchWritesNothing) {
  const Batch b = MakeBatch({4, 4, 16, 4, 0, 0}, {}, 1);
  float out = 7.0f;
  PagedAttention(b.Args(&out));
  EXPECT_EQ(out, 7.0f);
}

}  // namespace
}  // namespace sightline::kernels::cpu
