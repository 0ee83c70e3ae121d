// Names in messages: close-match suggestions for misspellings ("did you mean 'linear'?"),
// quoted lists, and clipping of overlong names.
//
// Candidates are ranked by Damerau-Levenshtein distance (a swapped pair of letters counts as
// one edit, so "lienar" is one edit from "linear"); a candidate is close when it is at most a
// third of the longer word's length away (but at least one edit) and is not a complete
// rewrite of the word (so 'a' is never offered for 'd').
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gradc::frontend {

// Edit distance with adjacent transpositions (optimal string alignment).
size_t editDistance(std::string_view a, std::string_view b);

// The closest candidates (ties kept, in the order given); empty when none is close.
std::vector<std::string> closeMatches(std::string_view word, const std::vector<std::string>& candidates);

// "did you mean 'linear'?" / "did you mean 'add' or 'mul'?"; empty when nothing is close.
std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates);

// "'a', 'b' and 'c'": names quoted and joined for messages (long lists are cut short).
std::string quotedList(const std::vector<std::string>& items);

// A name from the input, shortened for a message when it is very long.
std::string clip(std::string_view name);

}  // namespace gradc::frontend
