"""Errors of the message room: a message (or prompt text) that cannot be turned into data."""

from probench.errors import CheckFailed, UsageError


class MessageConversionError(CheckFailed):
    """A message could not be turned into data (or back); the message names the problem."""


class ImageEncodingError(MessageConversionError):
    """The image's ``encoding`` is not one the node understands."""


class ImageSizeError(MessageConversionError):
    """The image has zero width or height (or absurd dimensions)."""


class ImageStepError(MessageConversionError):
    """The image's ``step`` (bytes per row) does not fit its width and encoding."""


class ImageDataError(MessageConversionError):
    """The image's ``data`` is shorter or longer than ``step * height``."""


class CompressedImageError(MessageConversionError):
    """A CompressedImage has an unsupported format or does not decode."""


class PromptMessageError(UsageError):
    """A prompt message is empty, too long, or not decodable text."""


class SemanticClassesError(MessageConversionError):
    """More prompts than the semantic mask image (mono8, 0 = background) can hold."""
