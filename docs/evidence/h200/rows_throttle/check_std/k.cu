#include <ATen/ATen.h>
#include <torch/library.h>
namespace {
at::Tensor check_num(const at::Tensor& x, int64_t n) {
  TORCH_CHECK(n < 3, "check_num: at most ", 3, " rows, not ", n);
  return x;
}
at::Tensor check_str(const at::Tensor& x, int64_t n) {
  TORCH_CHECK(n < 3, "check_str: ", "too many rows");
  return x;
}
}
TORCH_LIBRARY(tcu, m) {
  m.def("check_num(Tensor x, int n) -> Tensor");
  m.def("check_str(Tensor x, int n) -> Tensor");
}
TORCH_LIBRARY_IMPL(tcu, CPU, m) {
  m.impl("check_num", &check_num);
  m.impl("check_str", &check_str);
}
