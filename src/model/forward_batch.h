// ForwardBatch: one model step's flattened input, mixing prefill chunks (extend with a cached
// prefix) and decode tokens (extend_len 1) of several sequences, SGLang's "extend" vocabulary.
//
// Tokens of sequence s occupy a contiguous range of token_ids/positions, in sequence order.
// kv_slots of a sequence covers positions [0, prefix_len + extend_len): the first prefix_len
// slots already hold K/V (written by earlier steps or shared through the radix cache); the model
// writes the K/V of the new tokens into the remaining extend_len slots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace radixserve::model {

class LoraAdapter;

struct SequenceExtend {
  int64_t prefix_len = 0;
  int64_t extend_len = 0;
  // Slot of each position 0 .. prefix_len + extend_len - 1; owned by the caller (typically a
  // row of the request-to-token table), valid for the duration of Forward.
  std::span<const int32_t> kv_slots;
  // The LoRA adapter whose update this sequence's projections add (lora_adapter.h); null: the
  // base model. Owned by the caller, valid for the duration of Forward.
  const LoraAdapter* lora = nullptr;
  // Speculative tree drafts (empty: every extend token follows the one before it). The last
  // tree_parents.size() extend tokens form a tree hanging off the extend token before them (the
  // tree's root): tree token i follows tree token tree_parents[i] (< i), or the root when it is -1.
  // A tree token attends to the keys before the tree and to its own ancestors, as if its path were
  // the sequence (the caller gives it the rotary position root's + depth); its K/V still goes to
  // its own slot, kv_slots[prefix_len + its extend index]. Owned by the caller like kv_slots.
  std::span<const int32_t> tree_parents = {};
};

// A forward pass's mixture-of-experts routing, for the expert-distribution recorder
// (engine/expert_recorder.h): counts[layer * num_experts + e] gains one per (token, k) choice of
// expert e in that layer, physical_counts[layer * num_physical + s] one per choice computed by
// physical slot s (expert_placement.h), and physical_to_logical's row of the layer is the
// placement the pass ran with; with per_token also topk_ids[(layer * num_tokens + t) * top_k + k] =
// token t's k-th expert (-1 in dense layers). Sized by the recorder (the map rows -1 until a MoE
// layer writes them).
struct ExpertChoices {
  int64_t num_experts = 0;
  int64_t num_physical = 0;
  int64_t top_k = 0;
  std::vector<int32_t> counts;               // [layers, num_experts]
  std::vector<int32_t> physical_counts;      // [layers, num_physical]
  std::vector<int32_t> physical_to_logical;  // [layers, num_physical]
  bool per_token = false;
  std::vector<int32_t> topk_ids;  // [layers, num_tokens, top_k] with per_token
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [num_tokens]
  std::vector<int64_t> positions;  // [num_tokens] rotary positions (normally prefix_len + i)
  std::vector<SequenceExtend> sequences;
  // Indices into token_ids whose logits are wanted, in output order.
  std::vector<int64_t> logit_indices;
  // Encoders only (BERT's segment embeddings): [num_tokens] token types; empty: all 0.
  std::vector<int32_t> token_type_ids;
  // Indices into token_ids whose final hidden states (after the last norm) are wanted as well, in
  // output order (CausalLM::ForwardWithHidden; SGLang's return_hidden_states).
  std::vector<int64_t> hidden_indices;
  // Where the MoE layers report their routing (null: not recorded). Not sent to tensor-parallel
  // followers: the leader routes every token itself.
  ExpertChoices* expert_choices = nullptr;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

}  // namespace radixserve::model
