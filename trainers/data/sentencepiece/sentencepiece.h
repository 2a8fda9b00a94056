// trainers/data/sentencepiece/sentencepiece.h — the SentencePiece backend of data.tokenizer
// (library relpos_sentencepiece, defined RELPOS_WITH_SENTENCEPIECE for its users): call
// register_sentencepiece() once at program start (cli/main.cpp, tests/main.cpp).
#pragma once

namespace relpos::train {
void register_sentencepiece();
}
