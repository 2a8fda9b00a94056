// nn/optim/param_groups.h — parameter groups for optimizers: each group carries its own
// weight decay and learning-rate multiplier (effective lr = optimizer lr * lr_scale).
// by_tag() splits a Module's parameters by their group tag (nn/module.h, group::k*) so that
// weight decay can be switched off for e.g. "position" and "norms_biases":
//   weight_decay(group) = 0 if its tag is in `no_decay`, else the given weight_decay.
#pragma once
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/module.h"

namespace relpos::nn::optim {

struct ParamGroup {
  std::vector<Variable> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;  // effective lr = lr * lr_scale
  std::string name;       // names this group's optimizer state keys; unique within an optimizer
};

// The tags excluded from weight decay by default: norms/biases and position parameters.
std::vector<std::string> default_no_decay_groups();

// One ParamGroup per distinct tag of m's parameters, named by the tag, in order of first
// appearance in m.named_parameters_with_groups() (so deterministic); parameters keep their
// registration order within a group. A tag listed in `no_decay` gets weight_decay 0, every
// other tag gets `weight_decay`; lr_scale is 1. Names in `no_decay` that match no tag are
// allowed (a model need not have position parameters). Errors: weight_decay negative or not
// finite, an empty name in no_decay.
std::vector<ParamGroup> param_groups_by_tag(const Module& m, double weight_decay,
                                            const std::vector<std::string>& no_decay =
                                                default_no_decay_groups());

// Checks groups for an optimizer named `who`: every group has a non-empty, unique name,
// weight_decay >= 0 and lr_scale >= 0 (both finite), and every parameter is defined,
// floating point and appears only once over all groups. Errors name the group (and the
// parameter index in it).
void validate_param_groups(const std::vector<ParamGroup>& groups, const char* who);

}  // namespace relpos::nn::optim
