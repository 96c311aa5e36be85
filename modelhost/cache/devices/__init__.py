"""The device tier: which models hold how many bytes of each device's budget.

Pure accounting: a reservation stays within its device's budget, each worker's context is
charged once per device, and a victim (awake, idle, there) sleeps in host memory.
"""

from modelhost.cache.devices.ledger import DeviceMemory, OnDevice, Placement
from modelhost.cache.devices.tier import DeviceTier

__all__ = ["DeviceMemory", "DeviceTier", "OnDevice", "Placement"]
