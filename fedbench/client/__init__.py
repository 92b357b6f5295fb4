"""The client side: fedbench's ClientApp, the device mod any ClientApp runs under, faults."""
