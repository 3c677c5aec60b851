/* A plain single-file C/OpenMP Llama forward pass (in the spirit of
 * llama2.c's run.c), written independently of Sightline's runner: the
 * baseline Sightline's CPU decode is measured against (PERFORMANCE.md) and a
 * check that both compute the same model (identical greedy tokens).
 * Reads the weights cpu_decode_bench --write-model writes; decodes greedily
 * from the benchmark's fixed prompt, one token at a time, float32 throughout.
 *   cc -Ofast -march=native -fopenmp reference_llama.c -lm -o reference_llama
 * (-Ofast as llama2.c builds it: the dot products vectorize only with
 * reassociation.)
 *   OMP_NUM_THREADS=1 ./reference_llama MODEL_FILE 256
 * Prints the generated tokens on one line, then the decode tokens/s. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int dim, ffn, layers, heads, kv_heads, vocab, head_dim;
} Config;

typedef struct {
  float *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
} Layer;

static float* take(FILE* f, size_t n) {
  float* p = malloc(n * sizeof(float));
  if (!p || fread(p, sizeof(float), n, f) != n) {
    fprintf(stderr, "short model file\n");
    exit(1);
  }
  return p;
}

/* out[n] = w[n][k] . x[k] */
static void matvec(float* out, const float* x, const float* w, int n, int k) {
#pragma omp parallel for
  for (int i = 0; i < n; i++) {
    const float* row = w + (size_t)i * k;
    float s = 0;
    for (int j = 0; j < k; j++) s += row[j] * x[j];
    out[i] = s;
  }
}

static void rmsnorm(float* out, const float* x, const float* w, int n) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float inv = 1.0f / sqrtf((float)(ss / n) + 1e-5f);
  for (int i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* Rotary embedding, "rotate half" pairing (i, i + head_dim / 2), theta 10000. */
static void rope(float* v, int heads, int hd, int pos) {
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < hd / 2; i++) {
      const double angle = pos * pow(10000.0, -2.0 * i / hd);
      const float c = (float)cos(angle), s = (float)sin(angle);
      float* x = v + h * hd;
      const float a = x[i], b = x[i + hd / 2];
      x[i] = a * c - b * s;
      x[i + hd / 2] = b * c + a * s;
    }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: reference_llama MODEL_FILE TOKENS\n");
    return 1;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  Config c;
  if (fread(&c, sizeof c, 1, f) != 1) return 1;
  const int steps = atoi(argv[2]), hd = c.head_dim, q_dim = c.heads * hd, kv_dim = c.kv_heads * hd;
  const int prompt_len = 16, max_len = prompt_len + steps;
  float* embed = take(f, (size_t)c.vocab * c.dim);
  Layer* L = calloc(c.layers, sizeof(Layer));
  for (int l = 0; l < c.layers; l++) {
    L[l].attn_norm = take(f, c.dim);
    L[l].wq = take(f, (size_t)q_dim * c.dim);
    L[l].wk = take(f, (size_t)kv_dim * c.dim);
    L[l].wv = take(f, (size_t)kv_dim * c.dim);
    L[l].wo = take(f, (size_t)c.dim * q_dim);
    L[l].ffn_norm = take(f, c.dim);
    L[l].w_gate = take(f, (size_t)c.ffn * c.dim);
    L[l].w_up = take(f, (size_t)c.ffn * c.dim);
    L[l].w_down = take(f, (size_t)c.dim * c.ffn);
  }
  float* final_norm = take(f, c.dim);
  float* lm_head = take(f, (size_t)c.vocab * c.dim);
  fclose(f);

  float *x = malloc(c.dim * sizeof(float)), *h = malloc(c.dim * sizeof(float));
  float *q = malloc(q_dim * sizeof(float)), *att = malloc(q_dim * sizeof(float));
  float *gate = malloc(c.ffn * sizeof(float)), *up = malloc(c.ffn * sizeof(float));
  float *logits = malloc(c.vocab * sizeof(float)), *scores = malloc(max_len * sizeof(float));
  float* kc = malloc((size_t)c.layers * max_len * kv_dim * sizeof(float));
  float* vc = malloc((size_t)c.layers * max_len * kv_dim * sizeof(float));

  int token = 0, generated = 0;
  double start = 0;
  for (int pos = 0; pos < max_len - 1; pos++) {
    /* The prompt cpu_decode_bench's request 0 has. */
    if (pos < prompt_len) token = (pos * 7919 + 1) % 32000;
    if (pos == prompt_len) start = omp_get_wtime(); /* the first token is the prefill's */
    memcpy(x, embed + (size_t)token * c.dim, c.dim * sizeof(float));
    for (int l = 0; l < c.layers; l++) {
      float* k = kc + ((size_t)l * max_len + pos) * kv_dim;
      float* v = vc + ((size_t)l * max_len + pos) * kv_dim;
      rmsnorm(h, x, L[l].attn_norm, c.dim);
      matvec(q, h, L[l].wq, q_dim, c.dim);
      matvec(k, h, L[l].wk, kv_dim, c.dim);
      matvec(v, h, L[l].wv, kv_dim, c.dim);
      rope(q, c.heads, hd, pos);
      rope(k, c.kv_heads, hd, pos);
      for (int head = 0; head < c.heads; head++) {
        const int kvh = head / (c.heads / c.kv_heads);
        const float* qh = q + head * hd;
        float max_s = -INFINITY, sum = 0;
        for (int t = 0; t <= pos; t++) {
          const float* kt = kc + ((size_t)l * max_len + t) * kv_dim + kvh * hd;
          float s = 0;
          for (int i = 0; i < hd; i++) s += qh[i] * kt[i];
          scores[t] = s / sqrtf((float)hd);
          if (scores[t] > max_s) max_s = scores[t];
        }
        for (int t = 0; t <= pos; t++) sum += (scores[t] = expf(scores[t] - max_s));
        float* o = att + head * hd;
        memset(o, 0, hd * sizeof(float));
        for (int t = 0; t <= pos; t++) {
          const float* vt = vc + ((size_t)l * max_len + t) * kv_dim + kvh * hd;
          for (int i = 0; i < hd; i++) o[i] += scores[t] / sum * vt[i];
        }
      }
      matvec(h, att, L[l].wo, c.dim, q_dim);
      for (int i = 0; i < c.dim; i++) x[i] += h[i];
      rmsnorm(h, x, L[l].ffn_norm, c.dim);
      matvec(gate, h, L[l].w_gate, c.ffn, c.dim);
      matvec(up, h, L[l].w_up, c.ffn, c.dim);
      for (int i = 0; i < c.ffn; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
      matvec(h, gate, L[l].w_down, c.dim, c.ffn);
      for (int i = 0; i < c.dim; i++) x[i] += h[i];
    }
    if (pos < prompt_len - 1) continue; /* prompt positions need no logits */
    rmsnorm(h, x, final_norm, c.dim);
    matvec(logits, h, lm_head, c.vocab, c.dim);
    int best = 0;
    for (int i = 1; i < c.vocab; i++)
      if (logits[i] > logits[best]) best = i;
    token = best;
    printf("%d ", token);
    generated++;
  }
  const double s = omp_get_wtime() - start;
  printf("\n%.2f tok/s (%d decode steps, %d threads)\n", (generated - 1) / s, generated - 1,
         omp_get_max_threads());
  return 0;
}
