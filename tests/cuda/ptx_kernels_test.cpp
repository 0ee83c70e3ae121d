// The CUDA backend's PTX loader (runtime/cuda/ptx_kernels.h): kernel names read from the text
// without a GPU; on a GPU, a kernel compiled by the driver and launched on the device's stream,
// and a PTX the driver rejects reported as an Error carrying its log. The generated kernels'
// own PTX runs end to end in scripts/gpu-check.sh (`fused_ptx`: a fused artifact's compiled step
// against its reference step).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <string>
#include <vector>

#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/ptx_kernels.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's.
#undef CHECK
#include <doctest/doctest.h>

namespace gradc::runtime {
namespace {

// y[i] = 2 x[i] + 1 over f32, a grid-stride loop: the launch ABI of the generated kernels
// (pointers, then i64 n), written by hand (its sm_70 target assembles with ptxas for sm_90).
constexpr const char* kAffinePtx = R"(
.version 7.8
.target sm_70
.address_size 64

.visible .entry gradc_test_affine(
	.param .u64 gradc_test_affine_param_0,
	.param .u64 gradc_test_affine_param_1,
	.param .u64 gradc_test_affine_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<10>;
	.reg .f32 	%f<3>;

	ld.param.u64 	%rd1, [gradc_test_affine_param_0];
	ld.param.u64 	%rd2, [gradc_test_affine_param_1];
	ld.param.u64 	%rd3, [gradc_test_affine_param_2];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mul.wide.u32 	%rd4, %r1, %r2;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd4, %rd4, %rd5;
	mul.wide.u32 	%rd6, %r4, %r2;
$L_loop:
	setp.ge.s64 	%p1, %rd4, %rd3;
	@%p1 bra 	$L_done;
	shl.b64 	%rd7, %rd4, 2;
	add.s64 	%rd8, %rd1, %rd7;
	ld.global.f32 	%f1, [%rd8];
	fma.rn.f32 	%f2, %f1, 0f40000000, 0f3F800000;
	add.s64 	%rd9, %rd2, %rd7;
	st.global.f32 	[%rd9], %f2;
	add.s64 	%rd4, %rd4, %rd6;
	bra.uni 	$L_loop;
$L_done:
	ret;
}
)";

}  // namespace

TEST_CASE("ptx: kernels are named from the text's entries, without a GPU; a text without any is refused") {
  Expected<std::shared_ptr<const GeneratedKernels>> k = ptxKernelsFromText(kAffinePtx, "affine.ptx");
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  CHECK((*k)->has("gradc_test_affine"));
  CHECK(!(*k)->has("gradc_test"));
  CHECK(!(*k)->has("gradc_test_affine_param_0"));
  Expected<std::shared_ptr<const GeneratedKernels>> none = ptxKernelsFromText(".version 7.8\n.target sm_90\n", "x.ptx");
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("x.ptx holds no kernel") != std::string::npos);
}

TEST_CASE("cuda: a PTX kernel is compiled by the driver and launched on the device's stream") {
  Expected<const Device*> d = cudaDevice(0);
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  Expected<std::shared_ptr<const GeneratedKernels>> k = ptxKernelsFromText(kAffinePtx, "affine.ptx");
  REQUIRE(k.ok());
  Expected<void*> fn = (*k)->function("gradc_test_affine", **d);
  REQUIRE_MESSAGE(fn.ok(), (fn.ok() ? "" : fn.error().message));
  Expected<void*> again = (*k)->function("gradc_test_affine", **d);
  REQUIRE(again.ok());
  CHECK(*again == *fn);  // compiled once per device
  // More elements than one grid covers (65,535 blocks of 256), so the loop strides.
  const std::int64_t n = std::int64_t{65535} * 256 + 1001;
  const at::Tensor x = at::randn({n}, at::TensorOptions().device(at::kCUDA, 0));
  at::Tensor y = at::empty_like(x);
  void* xp = x.data_ptr();
  void* yp = y.data_ptr();
  std::int64_t count = n;
  std::vector<void*> params{&xp, &yp, &count};
  Status s = launchPtxKernel(*fn, n, params.data(), at::cuda::getCurrentCUDAStream(0).stream());
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.message()));
  CHECK(at::equal(y.cpu(), x.cpu() * 2 + 1));
}

TEST_CASE("cuda: a PTX the driver rejects is an Error with its log, not an abort") {
  Expected<const Device*> d = cudaDevice(0);
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  const std::string broken = std::string(kAffinePtx).replace(std::string(kAffinePtx).find("fma.rn.f32"), 10, "fma.xx.f32");
  Expected<std::shared_ptr<const GeneratedKernels>> k = ptxKernelsFromText(broken, "broken.ptx");
  REQUIRE(k.ok());
  Expected<void*> fn = (*k)->function("gradc_test_affine", **d);
  REQUIRE(!fn.ok());
  CHECK(fn.error().message.find("cannot compile the PTX broken.ptx for cuda:0") != std::string::npos);
}

}  // namespace gradc::runtime
