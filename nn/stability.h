// nn/stability.h — the attention/logit stability knobs shared by every position encoding:
//   qk_norm   LayerNorm or RMSNorm over the head dim of q and k ([B, H, L, dh], one gain
//             (and bias) of size dh per layer, shared by the heads), applied after the
//             projections and before any rotation (Dehghani et al. 2023, ViT-22B; OLMo 2)
//   softcap   S -> c * tanh(S / c) on the attention logits, after every bias, before the
//             masks (Gemma 2); bounds |S| by c. 0 = off.
//   z_loss    coef * mean over positions of logsumexp(logits)^2 (PaLM, Chowdhery et al.
//             2022), added to the training loss; pulls the softmax normaliser towards 1.
// All are composed of differentiable ops (tanh, logsumexp, pow, mean, layer_norm/rms_norm).
#pragma once
#include <string>

#include "autograd/variable.h"

namespace relpos::nn {

struct AttnStability {
  std::string qk_norm = "none";  // none | layernorm | rmsnorm
  double softcap = 0.0;          // attention-logit soft cap c (0 = off)
};

// s: any shape -> c * tanh(s / c)
Variable softcap(const Variable& s, double c);

// logits: [..., V] -> [] : mean over the leading positions of logsumexp(logits, -1)^2
Variable z_loss(const Variable& logits);

}  // namespace relpos::nn
