// test-fusion-norm-quant.cpp — (being written)
#include <gtest/gtest.h>
