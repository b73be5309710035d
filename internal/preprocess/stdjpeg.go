package preprocess

import (
	"bytes"
	"image"
	"image/jpeg"
)

func stdJPEGConfig(data []byte) (image.Config, error) {
	return jpeg.DecodeConfig(bytes.NewReader(data))
}

func stdJPEGDecode(data []byte) (image.Image, error) {
	return jpeg.Decode(bytes.NewReader(data))
}
