//! Tensors over the harness's own memory, bound in place. The generation loop's KV cache, token
//! ids, positions, mask and logits live in [`Buffer`]s allocated once; each step binds [`View`]s
//! of them (a shape over a part of a buffer) through ONNX Runtime's raw I/O-binding API, so a
//! graph reads its past and writes its present where the loop put them — no copy. (The `ort`
//! crate's safe `IoBinding` copies a borrowed input and refuses a borrowed output.)

use std::ffi::{c_void, CString};
use std::ptr::{self, NonNull};

use anyhow::{anyhow, bail, Result};
use npugate_onnx::size::{self, Origin, TensorRequest};
use ort::memory::MemoryInfo;
use ort::session::IoBinding;
use ort::value::TensorElementType;
use ort::AsPointer;

use crate::memory;

/// 64 bytes, 64-byte aligned: the unit buffers are allocated in (what ORT's own allocator aligns to).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

/// Memory for a tensor of up to `elements` elements of one type, zeroed when allocated.
pub struct Buffer {
    blocks: Vec<Block>,
    ty: TensorElementType,
    elements: usize,
}

impl Buffer {
    /// A zeroed buffer named `name` for a tensor of `dims` of `ty` (a fixed-size numeric type),
    /// its size checked against the memory available first.
    pub fn new(name: &str, ty: TensorElementType, dims: &[i64]) -> Result<Buffer> {
        element_size(ty)?;
        let tensor = TensorRequest {
            name: name.to_string(),
            element_type: memory::element_type(ty),
            dims: dims.to_vec(),
            origin: Origin::Generation,
        };
        let bytes = usize::try_from(memory::check(&tensor)?)?;
        let elements = usize::try_from(size::element_count(dims).unwrap_or_default())?;
        Ok(Buffer { blocks: vec![Block([0; 64]); bytes.div_ceil(64).max(1)], ty, elements })
    }

    /// Its element type.
    pub fn element_type(&self) -> TensorElementType {
        self.ty
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        self.blocks.len() * 64
    }

    /// The address of element 0.
    pub fn data(&self) -> *const c_void {
        self.blocks.as_ptr().cast()
    }

    /// Zeroes it (a new generation starts from an empty cache).
    pub fn zero(&mut self) {
        self.blocks.fill(Block([0; 64]));
    }

    /// The bytes of elements `offset..offset + count`.
    fn range(&self, offset: usize, count: usize) -> Result<(usize, usize)> {
        let size = element_size(self.ty)?;
        if offset + count > self.elements {
            bail!("elements {offset}..{} are outside a buffer of {}", offset + count, self.elements);
        }
        Ok((offset * size, count * size))
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.blocks.len() * 64;
        // SAFETY: `Block` is plain bytes; the slice covers exactly the vector's allocation.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<u8>(), len) }
    }

    fn bytes_ref(&self) -> &[u8] {
        // SAFETY: as in `bytes_mut`.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.blocks.len() * 64) }
    }

    /// Writes integers at `offset` in the buffer's own integer type (int64 or int32 ids, positions, masks).
    pub fn write_ints(&mut self, offset: usize, values: &[i64]) -> Result<()> {
        let (start, _) = self.range(offset, values.len())?;
        let ty = self.ty;
        let bytes = self.bytes_mut();
        for (i, &value) in values.iter().enumerate() {
            match ty {
                TensorElementType::Int64 => {
                    bytes[start + i * 8..start + i * 8 + 8].copy_from_slice(&value.to_le_bytes())
                }
                TensorElementType::Int32 => {
                    let narrow = i32::try_from(value).map_err(|_| anyhow!("{value} does not fit an int32 input"))?;
                    bytes[start + i * 4..start + i * 4 + 4].copy_from_slice(&narrow.to_le_bytes())
                }
                other => bail!("ids, positions and masks must be int64 or int32, not {other:?}"),
            }
        }
        Ok(())
    }

    /// Element values at `offset..offset + count` as f32 (float32 or float16 logits).
    pub fn read_floats(&self, offset: usize, count: usize) -> Result<Vec<f32>> {
        let (start, len) = self.range(offset, count)?;
        let bytes = &self.bytes_ref()[start..start + len];
        match self.ty {
            TensorElementType::Float32 => {
                Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
            }
            TensorElementType::Float16 => {
                Ok(bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect())
            }
            other => bail!("logits must be float32 or float16, not {other:?}"),
        }
    }

    /// A tensor of `shape` over elements starting at `offset` (which must fit).
    pub fn view(&self, offset: usize, shape: &[i64]) -> Result<View> {
        let count: usize = shape.iter().map(|&d| usize::try_from(d).unwrap_or(0)).product();
        let (start, len) = self.range(offset, count)?;
        // ORT never frees this memory: the view only describes it.
        let data = self.data().cast::<u8>().wrapping_add(start).cast_mut().cast::<c_void>();
        let info = MemoryInfo::default();
        let mut value: *mut ort::sys::OrtValue = ptr::null_mut();
        // SAFETY: `data` points to `len` bytes of this buffer, which outlives every view the loop
        // binds (buffers are dropped after the sessions); shape and type describe exactly them.
        let status = unsafe {
            (ort::api().CreateTensorWithDataAsOrtValue)(
                info.ptr(),
                data,
                len,
                shape.as_ptr(),
                shape.len(),
                self.ty.into(),
                &mut value,
            )
        };
        // SAFETY: `status` was just returned by ORT.
        unsafe { ort::Error::result_from_status(status) }
            .map_err(|e| anyhow!("cannot make a tensor view of shape {shape:?}: {e}"))?;
        let value = NonNull::new(value).ok_or_else(|| anyhow!("ONNX Runtime returned no tensor view"))?;
        Ok(View { value, data })
    }
}

/// A tensor over part of a [`Buffer`] (released when dropped; a binding keeps its own reference).
pub struct View {
    value: NonNull<ort::sys::OrtValue>,
    data: *mut c_void,
}

impl View {
    /// Where its elements start.
    pub fn data(&self) -> *mut c_void {
        self.data
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: the value was created by CreateTensorWithDataAsOrtValue and is released once.
        unsafe { (ort::api().ReleaseValue)(self.value.as_ptr()) };
    }
}

/// Binds `view` to the input `name` of `binding` (ONNX Runtime reads it in place).
pub fn bind_input(binding: &IoBinding, name: &CString, view: &View) -> Result<()> {
    // SAFETY: binding, name and value are alive for the call; ORT keeps its own reference to the value.
    let status = unsafe { (ort::api().BindInput)(binding.ptr().cast_mut(), name.as_ptr(), view.value.as_ptr()) };
    // SAFETY: `status` was just returned by ORT.
    unsafe { ort::Error::result_from_status(status) }.map_err(|e| anyhow!("cannot bind input {name:?}: {e}"))
}

/// Binds `view` to the output `name` of `binding` (ONNX Runtime writes into it).
pub fn bind_output(binding: &IoBinding, name: &CString, view: &View) -> Result<()> {
    // SAFETY: as in `bind_input`.
    let status = unsafe { (ort::api().BindOutput)(binding.ptr().cast_mut(), name.as_ptr(), view.value.as_ptr()) };
    // SAFETY: `status` was just returned by ORT.
    unsafe { ort::Error::result_from_status(status) }.map_err(|e| anyhow!("cannot bind output {name:?}: {e}"))
}

/// Where each bound output's data is after a run, in binding order: a bound buffer ONNX Runtime
/// did not write into shows as another address.
pub fn bound_output_data(binding: &IoBinding) -> Result<Vec<*mut c_void>> {
    let api = ort::api();
    let mut allocator: *mut ort::sys::OrtAllocator = ptr::null_mut();
    let mut values: *mut *mut ort::sys::OrtValue = ptr::null_mut();
    let mut count = 0usize;
    // SAFETY: ORT fills `values` with `count` owned values allocated by the default allocator,
    // each released here, and the array freed with the same allocator.
    unsafe {
        ort::Error::result_from_status((api.GetAllocatorWithDefaultOptions)(&mut allocator))
            .map_err(|e| anyhow!("{e}"))?;
        ort::Error::result_from_status((api.GetBoundOutputValues)(binding.ptr(), allocator, &mut values, &mut count))
            .map_err(|e| anyhow!("cannot read the bound outputs: {e}"))?;
        let mut data = Vec::with_capacity(count);
        for i in 0..count {
            let value = *values.add(i);
            let mut address: *mut c_void = ptr::null_mut();
            let status = (api.GetTensorMutableData)(value, &mut address);
            let _ = ort::Error::result_from_status(status);
            data.push(address);
            (api.ReleaseValue)(value);
        }
        if !values.is_null() {
            let _ = ort::Error::result_from_status((api.AllocatorFree)(allocator, values.cast()));
        }
        Ok(data)
    }
}

/// Bytes per element of a fixed-size numeric type.
pub fn element_size(ty: TensorElementType) -> Result<usize> {
    ty.byte_size(1).filter(|&size| size > 0).ok_or_else(|| anyhow!("element type {ty:?} has no fixed size"))
}
