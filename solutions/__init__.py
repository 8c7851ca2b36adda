"""Reference implementation of every name in the course API (instructors only)."""
from solutions.embeddings import (
    TokenEmbedding,
    attention_over_words,
    build_vocab,
    embedding_matrix_from_word2vec,
    encode,
    pad_batch,
)
from solutions.positional import LearnedPositionalEmbedding, PositionalEncoding, sinusoidal_positional_encoding
from solutions.attention import make_causal_mask, make_padding_mask, scaled_dot_product_attention
from solutions.multi_head import MultiHeadAttention, merge_heads, split_heads
from solutions.encoder import Encoder, EncoderBlock, PositionwiseFeedForward
from solutions.transformer import Decoder, DecoderBlock, Transformer, cached_greedy_decode, greedy_decode
from solutions.classifier import TransformerClassifier, evaluate, masked_mean_pool, train_one_epoch

__all__ = [
    "build_vocab", "encode", "pad_batch", "TokenEmbedding", "embedding_matrix_from_word2vec", "attention_over_words",
    "sinusoidal_positional_encoding", "PositionalEncoding", "LearnedPositionalEmbedding",
    "make_padding_mask", "make_causal_mask", "scaled_dot_product_attention",
    "split_heads", "merge_heads", "MultiHeadAttention",
    "PositionwiseFeedForward", "EncoderBlock", "Encoder",
    "DecoderBlock", "Decoder", "Transformer", "greedy_decode", "cached_greedy_decode",
    "masked_mean_pool", "TransformerClassifier", "train_one_epoch", "evaluate",
]
