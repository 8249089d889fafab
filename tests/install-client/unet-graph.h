#pragma once

// The install-test client's UNet-like graph (unet-graph.cpp).

#include "ggml-backend.h"

// Builds and computes the graph on `cpu`, checks it against the double reference; returns the
// number of mismatching values (0 = pass) and the largest absolute error in `worst`.
int check_unet_graph(ggml_backend_t cpu, double & worst);
