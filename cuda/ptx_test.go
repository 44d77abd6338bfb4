package cuda

// PTX kernels for the tests, written by hand (PTX ISA 8.0 for sm_80; the
// driver JIT-compiles them for newer GPUs such as the H200's sm_90).

// ptxVectorAdd: vadd(const float* a, const float* b, float* c, int n)
// computes c[i] = a[i] + b[i]; noop() does nothing (launch overhead).
const ptxVectorAdd = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry vadd(
	.param .u64 vadd_a,
	.param .u64 vadd_b,
	.param .u64 vadd_c,
	.param .u32 vadd_n
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [vadd_a];
	ld.param.u64 	%rd2, [vadd_b];
	ld.param.u64 	%rd3, [vadd_c];
	ld.param.u32 	%r2, [vadd_n];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__done;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd6];
	ld.global.f32 	%f2, [%rd8];
	add.f32 	%f3, %f1, %f2;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;
$L__done:
	ret;
}

.visible .entry noop()
{
	ret;
}
`

// ptxProbe: probe(u8, u16, u32, u64, float, double, u64* out) writes its
// arguments, widened, to out[0..5] (the floats as doubles), to check
// argument marshalling of every size.
const ptxProbe = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry probe(
	.param .u8 probe_p0,
	.param .u16 probe_p1,
	.param .u32 probe_p2,
	.param .u64 probe_p3,
	.param .f32 probe_p4,
	.param .f64 probe_p5,
	.param .u64 probe_out
)
{
	.reg .b16 	%rs<3>;
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<8>;
	.reg .f32 	%f<2>;
	.reg .f64 	%fd<3>;

	ld.param.u8 	%rs1, [probe_p0];
	ld.param.u16 	%rs2, [probe_p1];
	ld.param.u32 	%r1, [probe_p2];
	ld.param.u64 	%rd1, [probe_p3];
	ld.param.f32 	%f1, [probe_p4];
	ld.param.f64 	%fd1, [probe_p5];
	ld.param.u64 	%rd2, [probe_out];
	cvta.to.global.u64 	%rd3, %rd2;
	cvt.u64.u16 	%rd4, %rs1;
	cvt.u64.u16 	%rd5, %rs2;
	cvt.u64.u32 	%rd6, %r1;
	cvt.f64.f32 	%fd2, %f1;
	st.global.u64 	[%rd3], %rd4;
	st.global.u64 	[%rd3+8], %rd5;
	st.global.u64 	[%rd3+16], %rd6;
	st.global.u64 	[%rd3+24], %rd1;
	st.global.f64 	[%rd3+32], %fd2;
	st.global.f64 	[%rd3+40], %fd1;
	ret;
}
`

// ptxBroken does not compile: the JIT log must reach the error.
const ptxBroken = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry broken()
{
	no.such.instruction 	%r1;
	ret;
}
`
