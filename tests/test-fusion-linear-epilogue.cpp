// test-fusion-linear-epilogue.cpp — (being written)
#include <gtest/gtest.h>
