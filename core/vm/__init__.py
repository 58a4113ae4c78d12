"""The virtual machine: the plan a step compiles to, the one interpreter that runs it on every
plane, the resources that live on a device (variables, queues) and the kernel namespaces."""
