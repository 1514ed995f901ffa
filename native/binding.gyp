{
  "targets": [
    {
      "target_name": "smol",
      "sources": [
        "binding/addon.cc",
        "binding/vm_wrap.cc",
        "vmm/acpi.c",
        "vmm/acpi_sleep.c",
        "vmm/boot.c",
        "vmm/console.c",
        "vmm/cpu.c",
        "vmm/cpu_time.c",
        "vmm/debug_dump.c",
        "vmm/debug_exit.c",
        "vmm/device.c",
        "vmm/error.c",
        "vmm/guest_mem.c",
        "vmm/i8042.c",
        "vmm/io.c",
        "vmm/kvm_probe.c",
        "vmm/loader.c",
        "vmm/mem_layer.c",
        "vmm/mptable.c",
        "vmm/pvpanic.c",
        "vmm/serial.c",
        "vmm/snapfile.c",
        "vmm/snapshot.c",
        "vmm/uart.c",
        "vmm/vm.c",
        "vmm/vmgenid.c"
      ],
      "include_dirs": ["vmm"],
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"],
      "cflags_c": ["-std=gnu11"],
      "cflags_cc": ["-std=c++17"],
      "ldflags": ["-pthread"]
    }
  ]
}
