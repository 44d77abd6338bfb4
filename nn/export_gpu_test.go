package nn

// GPUOrSkip is gpuOrSkip for the package's external tests.
var GPUOrSkip = gpuOrSkip
