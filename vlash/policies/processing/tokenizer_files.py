"""The file names a tokenizer is read from (torch-free: the command line checks a checkpoint's files with them)."""

TOKENIZER_JSON = "tokenizer.json"  # a Hugging Face tokenizers file
SENTENCEPIECE_MODEL = "tokenizer.model"  # a sentencepiece model (PaliGemma's, as openpi ships it)
