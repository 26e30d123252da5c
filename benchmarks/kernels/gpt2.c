/* A small GPT-2 in plain C, float, in the style of llm.c's train_gpt2.c (issue 31): one parameter
   block and one activation block, reached through structs of pointers; B x T x C activations; a
   forward pass that returns the mean cross-entropy loss and keeps every activation the backward
   needs; and a hand-written backward for each layer and for the whole model.

   Written for adoffload's benchmarks from the math of the layers (not copied from llm.c):
     encoder    x[b,t,:] = wte[token[b,t],:] + wpe[t,:]
     layernorm  y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + 1e-5)
     matmul     y[bt,o] = bias[o] + sum_i x[bt,i] * w[o,i]           (w is OC x C, row-major)
     attention  causal, NH heads of C/NH; q, k, v packed in one (B, T, 3C) tensor
     gelu       0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
     residual   y = a + b
     logits     lnf @ wte^T (the token embedding tied), softmax, loss = -log p[target], mean over B*T

   Block (pre-layernorm, as GPT-2):  r2 = r + proj(attn(ln1(r))),  r3 = r2 + fcproj(gelu(fc(ln2(r2)))).

   Entry points (runtime sizes, as llm.c): gpt2_num_parameters, gpt2_num_activations,
   gpt2_forward (the loss, filling acts), gpt2_backward (gradients of the mean loss; grads and
   grads_acts must be zero on entry, as after llm.c's zero_grad) and gpt2_zero. */
#include <math.h>
#include <stddef.h>

#define NUM_PARAMETER_TENSORS 16
typedef struct {
    float* wte;      /* V x C */
    float* wpe;      /* maxT x C */
    float* ln1w;     /* L x C */
    float* ln1b;     /* L x C */
    float* qkvw;     /* L x 3C x C */
    float* qkvb;     /* L x 3C */
    float* attprojw; /* L x C x C */
    float* attprojb; /* L x C */
    float* ln2w;     /* L x C */
    float* ln2b;     /* L x C */
    float* fcw;      /* L x 4C x C */
    float* fcb;      /* L x 4C */
    float* fcprojw;  /* L x C x 4C */
    float* fcprojb;  /* L x C */
    float* lnfw;     /* C */
    float* lnfb;     /* C */
} Params;

#define NUM_ACTIVATION_TENSORS 23
typedef struct {
    float* encoded;   /* B x T x C */
    float* ln1;       /* L x B x T x C */
    float* ln1_mean;  /* L x B x T */
    float* ln1_rstd;  /* L x B x T */
    float* qkv;       /* L x B x T x 3C */
    float* atty;      /* L x B x T x C */
    float* preatt;    /* L x B x NH x T x T */
    float* att;       /* L x B x NH x T x T */
    float* attproj;   /* L x B x T x C */
    float* residual2; /* L x B x T x C */
    float* ln2;       /* L x B x T x C */
    float* ln2_mean;  /* L x B x T */
    float* ln2_rstd;  /* L x B x T */
    float* fch;       /* L x B x T x 4C */
    float* fch_gelu;  /* L x B x T x 4C */
    float* fcproj;    /* L x B x T x C */
    float* residual3; /* L x B x T x C */
    float* lnf;       /* B x T x C */
    float* lnf_mean;  /* B x T */
    float* lnf_rstd;  /* B x T */
    float* logits;    /* B x T x V */
    float* probs;     /* B x T x V */
    float* losses;    /* B x T */
} Acts;

static void parameter_sizes(size_t* s, int V, int maxT, int C, int L) {
    s[0] = (size_t)V * C; s[1] = (size_t)maxT * C; s[2] = (size_t)L * C; s[3] = (size_t)L * C;
    s[4] = (size_t)L * 3 * C * C; s[5] = (size_t)L * 3 * C; s[6] = (size_t)L * C * C; s[7] = (size_t)L * C;
    s[8] = (size_t)L * C; s[9] = (size_t)L * C; s[10] = (size_t)L * 4 * C * C; s[11] = (size_t)L * 4 * C;
    s[12] = (size_t)L * C * 4 * C; s[13] = (size_t)L * C; s[14] = (size_t)C; s[15] = (size_t)C;
}

static void activation_sizes(size_t* s, int B, int T, int V, int C, int L, int NH) {
    size_t BT = (size_t)B * T, BTC = BT * C, LBTC = (size_t)L * BTC, att = (size_t)L * B * NH * T * T;
    s[0] = BTC; s[1] = LBTC; s[2] = L * BT; s[3] = L * BT; s[4] = 3 * LBTC; s[5] = LBTC; s[6] = att;
    s[7] = att; s[8] = LBTC; s[9] = LBTC; s[10] = LBTC; s[11] = L * BT; s[12] = L * BT; s[13] = 4 * LBTC;
    s[14] = 4 * LBTC; s[15] = LBTC; s[16] = LBTC; s[17] = BTC; s[18] = BT; s[19] = BT; s[20] = BT * V;
    s[21] = BT * V; s[22] = BT;
}

static void point_parameters(Params* p, float* memory, int V, int maxT, int C, int L) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    parameter_sizes(sizes, V, maxT, C, L);
    float** fields[NUM_PARAMETER_TENSORS] = {&p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb,
        &p->attprojw, &p->attprojb, &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb,
        &p->lnfw, &p->lnfb};
    float* next = memory;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { *fields[i] = next; next += sizes[i]; }
}

static void point_activations(Acts* a, float* memory, int B, int T, int V, int C, int L, int NH) {
    size_t sizes[NUM_ACTIVATION_TENSORS];
    activation_sizes(sizes, B, T, V, C, L, NH);
    float** fields[NUM_ACTIVATION_TENSORS] = {&a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv,
        &a->atty, &a->preatt, &a->att, &a->attproj, &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd,
        &a->fch, &a->fch_gelu, &a->fcproj, &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd,
        &a->logits, &a->probs, &a->losses};
    float* next = memory;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { *fields[i] = next; next += sizes[i]; }
}

size_t gpt2_num_parameters(int V, int maxT, int C, int L) {
    size_t sizes[NUM_PARAMETER_TENSORS], n = 0;
    parameter_sizes(sizes, V, maxT, C, L);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) n += sizes[i];
    return n;
}

size_t gpt2_num_activations(int B, int T, int V, int C, int L, int NH) {
    size_t sizes[NUM_ACTIVATION_TENSORS], n = 0;
    activation_sizes(sizes, B, T, V, C, L, NH);
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) n += sizes[i];
    return n;
}

void gpt2_zero(float* x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.0f;
}

/* ---------------------------------------------------------------- the layers, forward */

static void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float* o = out + ((size_t)b * T + t) * C;
            const float* e = wte + (size_t)tokens[b * T + t] * C;
            const float* p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
}

static void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                              const float* bias, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) { float d = x[c] - m; var += d * d; }
        var /= C;
        float s = 1.0f / sqrtf(var + 1e-5f);
        float* y = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + bias[c];
        mean[bt] = m;
        rstd[bt] = s;
    }
}

static void matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                           int B, int T, int C, int OC) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * C;
        float* y = out + (size_t)bt * OC;
        for (int o = 0; o < OC; o++) {
            const float* row = w + (size_t)o * C;
            float acc = bias != NULL ? bias[o] : 0.0f;
            for (int i = 0; i < C; i++) acc += x[i] * row[i];
            y[o] = acc;
        }
    }
}

static void attention_forward(float* out, float* preatt, float* att, const float* qkv,
                              int B, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float* pre = preatt + (((size_t)b * NH + h) * T + t) * T;
                float* a = att + (((size_t)b * NH + h) * T + t) * T;
                float mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const float* k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    dot *= scale;
                    pre[u] = dot;
                    if (dot > mx) mx = dot;
                }
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) { float e = expf(pre[u] - mx); a[u] = e; sum += e; }
                float inv = 1.0f / sum;
                for (int u = 0; u < T; u++) a[u] = u <= t ? a[u] * inv : 0.0f;
                float* y = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) y[i] = 0.0f;
                for (int u = 0; u <= t; u++) {
                    const float* v = qkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) y[i] += a[u] * v[i];
                }
            }
}

#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
static void gelu_forward(float* out, const float* x, int n) {
    for (int i = 0; i < n; i++) {
        float u = x[i];
        out[i] = 0.5f * u * (1.0f + tanhf(GELU_K * (u + 0.044715f * u * u * u)));
    }
}

static void residual_forward(float* out, const float* a, const float* b, int n) {
    for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void softmax_forward(float* probs, const float* logits, int B, int T, int V) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* l = logits + (size_t)bt * V;
        float* p = probs + (size_t)bt * V;
        float mx = -INFINITY;
        for (int v = 0; v < V; v++) if (l[v] > mx) mx = l[v];
        float sum = 0.0f;
        for (int v = 0; v < V; v++) { p[v] = expf(l[v] - mx); sum += p[v]; }
        for (int v = 0; v < V; v++) p[v] /= sum;
    }
}

static void crossentropy_forward(float* losses, const float* probs, const int* targets, int B, int T, int V) {
    for (int bt = 0; bt < B * T; bt++) losses[bt] = -logf(probs[(size_t)bt * V + targets[bt]]);
}

/* ---------------------------------------------------------------- the layers, backward
   Each adds its input gradients into d_* (accumulate: a tensor may feed several layers). */

static void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float* g = dout + ((size_t)b * T + t) * C;
            float* e = dwte + (size_t)tokens[b * T + t] * C;
            float* p = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) { e[c] += g[c]; p[c] += g[c]; }
        }
}

/* y = n * w + b with n = (x - m) s: dw += g n, db += g, and with dn = g w,
   dx = s (dn - mean(dn) - n mean(dn n)) (m and s depend on x). */
static void layernorm_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                               const float* w, const float* mean, const float* rstd, int B, int T, int C) {
    for (int bt = 0; bt < B * T; bt++) {
        const float* g = dout + (size_t)bt * C;
        const float* x = inp + (size_t)bt * C;
        float* dx = dinp + (size_t)bt * C;
        float m = mean[bt], s = rstd[bt];
        float mean_dn = 0.0f, mean_dn_n = 0.0f;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s, dn = g[c] * w[c];
            mean_dn += dn;
            mean_dn_n += dn * n;
        }
        mean_dn /= C;
        mean_dn_n /= C;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s, dn = g[c] * w[c];
            dw[c] += g[c] * n;
            dbias[c] += g[c];
            dx[c] += s * (dn - mean_dn - n * mean_dn_n);
        }
    }
}

static void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                            const float* w, int B, int T, int C, int OC) {
    /* dx[bt, :] += sum_o g[bt, o] w[o, :] */
    for (int bt = 0; bt < B * T; bt++) {
        const float* g = dout + (size_t)bt * OC;
        float* dx = dinp + (size_t)bt * C;
        for (int o = 0; o < OC; o++) {
            const float* row = w + (size_t)o * C;
            float go = g[o];
            for (int i = 0; i < C; i++) dx[i] += go * row[i];
        }
    }
    /* dw[o, :] += sum_bt g[bt, o] x[bt, :],  dbias[o] += sum_bt g[bt, o] */
    for (int o = 0; o < OC; o++) {
        float* drow = dw + (size_t)o * C;
        float gsum = 0.0f;
        for (int bt = 0; bt < B * T; bt++) {
            float go = dout[(size_t)bt * OC + o];
            const float* x = inp + (size_t)bt * C;
            for (int i = 0; i < C; i++) drow[i] += go * x[i];
            gsum += go;
        }
        if (dbias != NULL) dbias[o] += gsum;
    }
}

/* per (b, t, h): datt[u] = g . v[u]; dv[u] += att[u] g; dpre[u] = att[u] (datt[u] - sum_u' att[u'] datt[u']);
   dq += scale sum_u dpre[u] k[u]; dk[u] += scale dpre[u] q. datt and dpreatt are scratch of preatt's shape. */
static void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                               const float* att, int B, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float* a = att + (((size_t)b * NH + h) * T + t) * T;
                float* da = datt + (((size_t)b * NH + h) * T + t) * T;
                float* dpre = dpreatt + (((size_t)b * NH + h) * T + t) * T;
                const float* g = dout + ((size_t)b * T + t) * C + h * hs;
                const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float* dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                for (int u = 0; u <= t; u++) {
                    const float* v = qkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
                    float* dv = dqkv + ((size_t)b * T + u) * C3 + 2 * C + h * hs;
                    float s = 0.0f;
                    for (int i = 0; i < hs; i++) { s += g[i] * v[i]; dv[i] += a[u] * g[i]; }
                    da[u] += s;
                }
                float dot = 0.0f;
                for (int u = 0; u <= t; u++) dot += a[u] * da[u];
                for (int u = 0; u <= t; u++) dpre[u] += a[u] * (da[u] - dot);
                for (int u = 0; u <= t; u++) {
                    const float* k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
                    float* dk = dqkv + ((size_t)b * T + u) * C3 + C + h * hs;
                    float d = dpre[u] * scale;
                    for (int i = 0; i < hs; i++) { dq[i] += d * k[i]; dk[i] += d * q[i]; }
                }
            }
}

static void gelu_backward(float* dinp, const float* x, const float* dout, int n) {
    for (int i = 0; i < n; i++) {
        float u = x[i];
        float th = tanhf(GELU_K * (u + 0.044715f * u * u * u));
        float dth = (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * u * u);
        dinp[i] += dout[i] * (0.5f * (1.0f + th) + 0.5f * u * dth);
    }
}

static void residual_backward(float* da, float* db, const float* dout, int n) {
    for (int i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

/* loss = mean over bt of -log softmax(logits)[target]: dlogits = (p - onehot) / (B T) */
static void crossentropy_softmax_backward(float* dlogits, const float* probs, const int* targets,
                                          int B, int T, int V) {
    float dloss = 1.0f / (B * T);
    for (int bt = 0; bt < B * T; bt++) {
        const float* p = probs + (size_t)bt * V;
        float* d = dlogits + (size_t)bt * V;
        for (int v = 0; v < V; v++) d[v] += (p[v] - (v == targets[bt] ? 1.0f : 0.0f)) * dloss;
    }
}

/* ---------------------------------------------------------------- the model */

float gpt2_forward(float* params_memory, float* acts_memory, const int* inputs, const int* targets,
                   int B, int T, int V, int maxT, int C, int L, int NH) {
    Params p;
    Acts a;
    point_parameters(&p, params_memory, V, maxT, C, L);
    point_activations(&a, acts_memory, B, T, V, C, L, NH);
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    encoder_forward(a.encoded, inputs, p.wte, p.wpe, B, T, C);
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* ln1 = a.ln1 + l * BTC;
        float* qkv = a.qkv + l * 3 * BTC;
        float* atty = a.atty + l * BTC;
        float* preatt = a.preatt + (size_t)l * B * NH * T * T;
        float* att = a.att + (size_t)l * B * NH * T * T;
        float* attproj = a.attproj + l * BTC;
        float* residual2 = a.residual2 + l * BTC;
        float* ln2 = a.ln2 + l * BTC;
        float* fch = a.fch + l * 4 * BTC;
        float* fch_gelu = a.fch_gelu + l * 4 * BTC;
        float* fcproj = a.fcproj + l * BTC;
        float* residual3 = a.residual3 + l * BTC;
        layernorm_forward(ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, residual, p.ln1w + l * C, p.ln1b + l * C,
                          B, T, C);
        matmul_forward(qkv, ln1, p.qkvw + (size_t)l * 3 * C * C, p.qkvb + l * 3 * C, B, T, C, 3 * C);
        attention_forward(atty, preatt, att, qkv, B, T, C, NH);
        matmul_forward(attproj, atty, p.attprojw + (size_t)l * C * C, p.attprojb + l * C, B, T, C, C);
        residual_forward(residual2, residual, attproj, B * T * C);
        layernorm_forward(ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, residual2, p.ln2w + l * C, p.ln2b + l * C,
                          B, T, C);
        matmul_forward(fch, ln2, p.fcw + (size_t)l * 4 * C * C, p.fcb + l * 4 * C, B, T, C, 4 * C);
        gelu_forward(fch_gelu, fch, B * T * 4 * C);
        matmul_forward(fcproj, fch_gelu, p.fcprojw + (size_t)l * 4 * C * C, p.fcprojb + l * C, B, T, 4 * C, C);
        residual_forward(residual3, residual2, fcproj, B * T * C);
    }
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3 + (L - 1) * BTC, p.lnfw, p.lnfb, B, T, C);
    matmul_forward(a.logits, a.lnf, p.wte, NULL, B, T, C, V);
    softmax_forward(a.probs, a.logits, B, T, V);
    crossentropy_forward(a.losses, a.probs, targets, B, T, V);
    float loss = 0.0f;
    for (int bt = 0; bt < B * T; bt++) loss += a.losses[bt];
    return loss / (B * T);
}

/* The gradient of gpt2_forward's loss at the activations it left in acts_memory, added into
   grads_memory (parameters' shape); grads_acts_memory (activations' shape) is scratch. Both must be
   zero on entry. */
void gpt2_backward(const float* params_memory, float* grads_memory, float* acts_memory, float* grads_acts_memory,
                   const int* inputs, const int* targets, int B, int T, int V, int maxT, int C, int L, int NH) {
    Params p, g;
    Acts a, d;
    point_parameters(&p, (float*)params_memory, V, maxT, C, L);
    point_parameters(&g, grads_memory, V, maxT, C, L);
    point_activations(&a, acts_memory, B, T, V, C, L, NH);
    point_activations(&d, grads_acts_memory, B, T, V, C, L, NH);
    size_t BTC = (size_t)B * T * C, BT = (size_t)B * T;
    crossentropy_softmax_backward(d.logits, a.probs, targets, B, T, V);
    matmul_backward(d.lnf, g.wte, NULL, d.logits, a.lnf, p.wte, B, T, C, V);
    float* last = a.residual3 + (L - 1) * BTC;
    float* dlast = d.residual3 + (L - 1) * BTC;
    layernorm_backward(dlast, g.lnfw, g.lnfb, d.lnf, last, p.lnfw, a.lnf_mean, a.lnf_rstd, B, T, C);
    for (int l = L - 1; l >= 0; l--) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * BTC;
        float* dresidual = l == 0 ? d.encoded : d.residual3 + (l - 1) * BTC;
        size_t att_at = (size_t)l * B * NH * T * T;
        /* r3 = r2 + fcproj */
        residual_backward(d.residual2 + l * BTC, d.fcproj + l * BTC, d.residual3 + l * BTC, B * T * C);
        matmul_backward(d.fch_gelu + l * 4 * BTC, g.fcprojw + (size_t)l * 4 * C * C, g.fcprojb + l * C,
                        d.fcproj + l * BTC, a.fch_gelu + l * 4 * BTC, p.fcprojw + (size_t)l * 4 * C * C, B, T, 4 * C, C);
        gelu_backward(d.fch + l * 4 * BTC, a.fch + l * 4 * BTC, d.fch_gelu + l * 4 * BTC, B * T * 4 * C);
        matmul_backward(d.ln2 + l * BTC, g.fcw + (size_t)l * 4 * C * C, g.fcb + l * 4 * C, d.fch + l * 4 * BTC,
                        a.ln2 + l * BTC, p.fcw + (size_t)l * 4 * C * C, B, T, C, 4 * C);
        layernorm_backward(d.residual2 + l * BTC, g.ln2w + l * C, g.ln2b + l * C, d.ln2 + l * BTC,
                           a.residual2 + l * BTC, p.ln2w + l * C, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, B, T, C);
        /* r2 = r + attproj */
        residual_backward(dresidual, d.attproj + l * BTC, d.residual2 + l * BTC, B * T * C);
        matmul_backward(d.atty + l * BTC, g.attprojw + (size_t)l * C * C, g.attprojb + l * C, d.attproj + l * BTC,
                        a.atty + l * BTC, p.attprojw + (size_t)l * C * C, B, T, C, C);
        attention_backward(d.qkv + l * 3 * BTC, d.preatt + att_at, d.att + att_at, d.atty + l * BTC,
                           a.qkv + l * 3 * BTC, a.att + att_at, B, T, C, NH);
        matmul_backward(d.ln1 + l * BTC, g.qkvw + (size_t)l * 3 * C * C, g.qkvb + l * 3 * C, d.qkv + l * 3 * BTC,
                        a.ln1 + l * BTC, p.qkvw + (size_t)l * 3 * C * C, B, T, C, 3 * C);
        layernorm_backward(dresidual, g.ln1w + l * C, g.ln1b + l * C, d.ln1 + l * BTC, residual, p.ln1w + l * C,
                           a.ln1_mean + l * BT, a.ln1_rstd + l * BT, B, T, C);
    }
    encoder_backward(g.wte, g.wpe, d.encoded, inputs, B, T, C);
}
