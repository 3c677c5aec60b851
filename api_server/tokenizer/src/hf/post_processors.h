// The post-processors of a tokenizer.json ("post_processor": ...): what
// `add_special_tokens` adds around one sequence, as `tokenizers`
// src/processors/* do it: TemplateProcessing (the single template),
// BertProcessing and RobertaProcessing ([cls] $A [sep]), ByteLevel (offsets
// only: nothing to ids) and Sequence. Others are refused by name.
//
// MakePostProcessor is declared in components.h. Process() is only called
// for add_special_tokens; without it `tokenizers` adds nothing.
#pragma once

#include "hf/components.h"
