# The tiny ZAYA1 model the script tests train in seconds (vocabulary 320: a tokenizer trained
# on tests/data/kjv_sample.txt with --vocab-size 320). Source it, then
#   tiny_model_toml NAME > "$W/model.toml"
tiny_model_toml() {
  cat <<TOML
name = "${1:?usage: tiny_model_toml NAME}"
model_type = "zaya"
hidden_size = 32
vocab_size = 320
num_attention_heads = 8
cca_num_q_heads = 4
num_query_groups_list = 2
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 48
zaya_mlp_expansion = 16
max_position_embeddings = 128
TOML
}
