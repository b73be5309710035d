// Package preprocess turns encoded images into training tensors the way
// torchvision does, faster, once per sample for every job on the node.
//
// Forms (Seneca §2, Table 1): encoded bytes → decoded (decode + static
// steps, deterministic, cacheable) → augmented (random steps, one per
// sample per round, shared by the jobs and then dropped).
//
//   - Decoder: JPEG through libjpeg-turbo (cgo), scaled 1/2, 1/4 or 1/8
//     in the DCT domain when the next step's size allows (PIL's draft()),
//     or only a rectangle (DecodeRegion: rows above skipped without IDCT,
//     columns outside cropped, rows below never read) when the first step
//     is a RandomResizedCrop; PNG through image/png; grayscale and CMYK
//     become RGB. Headers are checked against a pixel limit before any
//     pixel memory exists. Go's image/jpeg is the fallback without cgo.
//   - Pipeline: Resize, CenterCrop, RandomResizedCrop, RandomHorizontalFlip
//     with torchvision's parameters and PIL's exact bilinear resampling;
//     output uint8 HWC or float32 CHW (ToTensor, then Normalize); each
//     sample's randomness comes from SampleRNG(seed, key).
//   - NPY encoding (format 1.0, 64-byte aligned data) that numpy.load and
//     torch.from_numpy read without copying. A pipeline makes each tensor
//     inside its own .npy file (Tensor.NPY: no encoding, no copy, one
//     write; Tensor.Release: the buffer goes back for the next sample).
//   - Buffers: every buffer of a sample (the file read by LoadFile, the
//     decode, the resize, the tensor) comes from a size-classed pool the
//     pipeline owns, so a long-running caller allocates no image- or
//     tensor-sized memory per sample (bufpool.go).
//   - Pool: MinatoLoader's fast/slow load balancer (see pool.go).
//   - Engine and View: the views' decoded and augmented caches within
//     byte budgets from the caller, consumer counts on augmented entries,
//     one computation per sample however many jobs ask at once
//     (engine.go).
//
// The package imports no config; see spec for the step syntax shared
// with the [preprocess] config section.
package preprocess
