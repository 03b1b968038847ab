"""Errors of the spatial room: depth or camera data that cannot give 3D positions."""

from probench.errors import CheckFailed


class SpatialError(CheckFailed):
    """Depth or camera data cannot be used for 3D estimates; the message names the problem."""


class DepthEncodingError(SpatialError):
    """The depth image's encoding is not 16UC1 (millimetres) or 32FC1 (metres)."""


class IntrinsicsError(SpatialError):
    """The CameraInfo's K cannot back-project (zero or non-finite focal length, zero size)."""


class MaskError(SpatialError):
    """Instance masks that cannot be turned into the mask images."""


class NoMasksError(MaskError):
    """The detections carry no instance masks (a model without masks)."""


class MaskShapeError(MaskError):
    """The masks' (H, W) differ from the image's (a plugin's masks of the wrong shape)."""
