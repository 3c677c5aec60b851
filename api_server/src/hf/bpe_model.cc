// Placeholder: written by the issue-15 tokenizer slice (see components.h).
