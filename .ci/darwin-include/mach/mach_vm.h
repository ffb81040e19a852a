/*
 * A stand-in for the macOS SDK's <mach/mach_vm.h>, which zig does not ship,
 * for `make vet-darwin` on Linux: client_golang's darwin process collector
 * includes it for this one function. Enough to compile and vet; nothing is
 * linked against it (a Mac builds with its own SDK).
 */
kern_return_t mach_vm_region(vm_map_t target_task, mach_vm_address_t *address, mach_vm_size_t *size,
	vm_region_flavor_t flavor, vm_region_info_t info, mach_msg_type_number_t *infoCnt, mach_port_t *object_name);
