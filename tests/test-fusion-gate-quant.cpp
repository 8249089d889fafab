// test-fusion-gate-quant.cpp — (being written)
#include <gtest/gtest.h>
