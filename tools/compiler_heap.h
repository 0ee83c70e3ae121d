// The heap of a compiling process (gradc compile).
//
// Compiling a large spec builds graphs of millions of nodes and, per remat proposal, flat
// arrays of the same few sizes again and again. glibc's defaults return freed memory to the
// kernel (top-of-heap trimming; mmap for blocks above a threshold), so each reuse faults in and
// zeroes fresh pages: on a virtual machine, a third of a 150,000-layer summary's time.
// And destroying the final graphs at exit frees every node, use list and attribute one by one,
// while the process's exit reclaims them at once.
//
// tuneHeapForCompiling() keeps freed memory in the process for reuse and asks for transparent
// huge pages where the heap will grow (a first touch then faults in and zeroes 2 MiB at once:
// on this project's virtual machines about 1.2-1.9 s per GiB instead of 3.5 s with 4 KiB
// pages); keepUntilExit() hands an object to the process's end instead of its destructor.
// Neither is used by training, whose resident memory must follow the plan.
#pragma once

#include <type_traits>
#include <utility>

namespace gradc::tools {

// Freed memory stays in the process (no trimming, no mmap'd blocks), and the heap grows into
// memory advised for huge pages. Call once, before compiling.
void tuneHeapForCompiling();

// Moves `object` to the heap and never destroys it: the process's exit reclaims its memory.
// For the large graphs a compile command holds when it finishes.
template <class T>
void keepUntilExit(T&& object) {
  new std::decay_t<T>(std::forward<T>(object));  // deliberately never deleted
}

}  // namespace gradc::tools
