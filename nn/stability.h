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
#include "core/enum_names.h"

namespace relpos::nn {

// model.qk_norm
enum class QkNorm { None, LayerNorm, RMSNorm };

struct AttnStability {
  QkNorm qk_norm = QkNorm::None;
  double softcap = 0.0;          // attention-logit soft cap c (0 = off)
  bool operator==(const AttnStability&) const = default;
};

// s: any shape -> c * tanh(s / c)
Variable softcap(const Variable& s, double c);

// logits: [..., V] -> [] : mean over the leading positions of logsumexp(logits, -1)^2
Variable z_loss(const Variable& logits);

// Monitors. abs_x = |x| -> 1 where x is finite, 0 where it is NaN or ±inf (abs_x's shape,
// dtype and device). The block-output and gradient NaN/inf counts (TransformerBlock, trainer).
Tensor finite_mask(const Tensor& abs_x);

}  // namespace relpos::nn

template <>
struct relpos::EnumTable<relpos::nn::QkNorm> {
  static constexpr EnumName<nn::QkNorm> items[] = {
      {nn::QkNorm::None, "none"}, {nn::QkNorm::LayerNorm, "layernorm"}, {nn::QkNorm::RMSNorm, "rmsnorm"}};
};
