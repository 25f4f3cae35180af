"""Device profiles (configs/devices/), Jetson detection, and the roofline floor of pi0.5 on a device. These import
without torch (the command line reads a profile before anything heavy loads); `resolve_device` imports it."""

from vlash.devices.jetson import detect_jetson
from vlash.devices.profile import DeviceProfile, available_profiles, is_profile_name, load_profile, profile_from_dict
from vlash.devices.roofline import Floor, Work, denoise_work, model_floors, prefill_work
from vlash.lazy_exports import lazy_exports

__all__ = [
    "DeviceProfile",
    "Floor",
    "Work",
    "available_profiles",
    "denoise_work",
    "detect_jetson",
    "is_profile_name",
    "load_profile",
    "model_floors",
    "prefill_work",
    "profile_from_dict",
    "resolve_device",
]
__getattr__ = lazy_exports(__name__, {"resolve_device": ".torch_device"})
