"""The device tier: which models hold how many bytes of each device's budget.

Pure accounting, the memory tier's sibling: a reservation stays within its device's budget, each
worker's context is charged once per device, and a victim is awake, idle and on that device.
A victim leaves the device for host memory (it sleeps there), not the server.
"""

from modelhost.cache.devices.ledger import DeviceMemory, OnDevice, Placement
from modelhost.cache.devices.tier import DeviceTier

__all__ = ["DeviceMemory", "DeviceTier", "OnDevice", "Placement"]
