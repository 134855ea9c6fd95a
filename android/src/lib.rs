//! The Android side of npugate: devices over adb. The adb client (one process per step, each with a
//! timeout; shell quoting and the device command set), device selection and probing, content-addressed
//! deploy, the on-device lock shared by processes and hosts, each device's thermal/clock/load state
//! before and after a run, energy per inference from the battery gauge, and importing Android runtimes (an AAR, a QAIRT SDK).

pub mod adb;
pub mod deploy;
pub mod device_load;
pub mod device_lock;
pub mod device_state;
pub mod devices;
pub mod energy;
pub mod runtime_import;
