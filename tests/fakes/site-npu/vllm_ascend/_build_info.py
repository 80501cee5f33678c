# Auto-generated file
__device_type__ = 'A2'
