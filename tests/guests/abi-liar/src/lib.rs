//! A guest that lies to the host through the canonical ABI, to prove the
//! host's lifting and lowering checks hold (they are wasmtime's; these
//! tests pin them, and the host's handling of their errors).
//!
//! - Results: `call` returns strings that are not UTF-8, and strings and
//!   lists whose pointers lie outside memory. The lies are built with
//!   `unsafe` on purpose. (An impossible enum discriminant cannot be told
//!   this way: the compiler normalises it while lowering.)
//! - Allocation: the global allocator answers an allocation of exactly
//!   [`LIE_OUT_OF_BOUNDS`] bytes with a pointer past the end of memory, and
//!   one of [`LIE_NULL`] bytes with null. The host allocates through
//!   `cabi_realloc` when it passes the input string in, so an input of that
//!   length makes the host write where it must not.

use airlock_sdk::{
    ContentBlock, Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool,
};
use serde::Deserialize;
use std::alloc::{GlobalAlloc, Layout, System};

/// An allocation of this many bytes gets a pointer outside memory.
pub const LIE_OUT_OF_BOUNDS: usize = 54_321;
/// An allocation of this many bytes gets null.
pub const LIE_NULL: usize = 54_322;

struct LyingAllocator;

unsafe impl GlobalAlloc for LyingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match layout.size() {
            LIE_OUT_OF_BOUNDS => 0xFFFF_FF00usize as *mut u8,
            LIE_NULL => std::ptr::null_mut(),
            // SAFETY: forwarding to the system allocator.
            _ => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !matches!(layout.size(), LIE_OUT_OF_BOUNDS | LIE_NULL) {
            // SAFETY: the pointer came from the system allocator.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

#[global_allocator]
static ALLOCATOR: LyingAllocator = LyingAllocator;

/// Which lie to tell.
#[derive(Deserialize, JsonSchema)]
struct LieInput {
    /// `bad_utf8`, `oob_string`, `oob_list`, or `truth`.
    lie: String,
    /// Padding, to make the input a given length.
    #[serde(default)]
    pad: String,
}

struct AbiLiar;

impl Tool for AbiLiar {
    type Input = LieInput;

    fn describe() -> Describe {
        Describe::new("abi_liar", "Lies through the canonical ABI.")
    }

    fn call(input: LieInput, _cx: &Context) -> Result<Output, ToolError> {
        let _ = input.pad;
        let mut out = Output::new().into_inner();
        match input.lie.as_str() {
            "truth" => return Ok(Output::text("the truth")),
            "bad_utf8" => {
                // SAFETY (on purpose, it is not): the bytes are not UTF-8.
                let text = unsafe {
                    String::from_utf8_unchecked(vec![b'o', b'k', 0xFF, 0xFE, 0xC0, 0x80])
                };
                out.content.push(ContentBlock::Text(text));
            }
            "oob_string" => {
                // SAFETY (on purpose, it is not): the pointer is outside memory.
                let text =
                    unsafe { String::from_raw_parts(0xFFFF_0000usize as *mut u8, 4096, 4096) };
                out.content.push(ContentBlock::Text(text));
            }
            "oob_list" => {
                // SAFETY (on purpose, it is not): the pointer is outside memory.
                out.content = unsafe {
                    Vec::from_raw_parts(0xFFFF_0000usize as *mut ContentBlock, 1 << 20, 1 << 20)
                };
            }
            other => return Err(ToolError::InvalidInput(format!("unknown lie {other}"))),
        }
        Ok(Output::from_inner(out))
    }
}

export_tool!(AbiLiar);
