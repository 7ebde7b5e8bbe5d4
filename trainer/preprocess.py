"""Image decoding and resizing shared by dataset preparation and the serving signature.

Using one function for both keeps what the model sees in training and in
prediction identical.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from trainer.contract import MIN_IMAGE_SIZE

__all__ = ["MIN_IMAGE_SIZE", "decode_and_resize", "resize_uint8"]


def resize_uint8(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """Resize an H×W×C image (any dtype, 0–255 range) to height×width uint8, antialiased."""
    resized = tf.image.resize(tf.cast(image, tf.float32), [height, width], antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)


def decode_and_resize(encoded: tf.Tensor, image_shape: Sequence[int]) -> tf.Tensor:
    """Decode JPEG/PNG/GIF/BMP bytes to `image_shape` (H, W, C) uint8."""
    height, width, channels = (int(d) for d in image_shape)
    # Every format decodes to RGB (GIF and BMP refuse channels=1); greyscale is derived after.
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    if channels == 1:
        image = tf.image.rgb_to_grayscale(image)
    return resize_uint8(image, height, width)
