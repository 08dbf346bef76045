"""Adapters from the MQE env to the trainers (HARL, OpenRL) over one statistics module."""
