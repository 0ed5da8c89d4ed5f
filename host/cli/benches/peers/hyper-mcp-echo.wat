;; A hyper-mcp (v1) plugin for Extism, in WAT: `describe` lists one tool,
;; `echo`; `call` answers with the request it was given, as text.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"tools\":[{\"name\":\"echo\",\"description\":\"Echoes its request.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},\"required\":[\"message\"]}}]}")
  (data (i32.const 512) "{\"content\":[{\"type\":\"text\",\"text\":\"")
  (data (i32.const 768) "\"}],\"isError\":false}")
  ;; copies `len` bytes of this module's memory at `src` to Extism memory at `dst`
  (func $copy (param $dst i64) (param $src i32) (param $len i32) (result i64)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (call $store_u8
          (i64.add (local.get $dst) (i64.extend_i32_u (local.get $i)))
          (i32.load8_u (i32.add (local.get $src) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.add (local.get $dst) (i64.extend_i32_u (local.get $len))))
  (func (export "describe") (result i32)
    (local $out i64)
    (local.set $out (call $alloc (i64.const 161)))
    (drop (call $copy (local.get $out) (i32.const 0) (i32.const 161)))
    (call $output_set (local.get $out) (i64.const 161))
    (i32.const 0))
  (func (export "call") (result i32)
    (local $n i64) (local $out i64) (local $at i64) (local $i i64) (local $b i32)
    (local.set $n (call $input_length))
    (local.set $out (call $alloc (i64.add (i64.mul (local.get $n) (i64.const 2)) (i64.const 64))))
    (local.set $at (call $copy (local.get $out) (i32.const 512) (i32.const 35)))
    (block $done
      (loop $next
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (local.set $b (call $input_load_u8 (local.get $i)))
        (if (i32.or (i32.eq (local.get $b) (i32.const 34)) (i32.eq (local.get $b) (i32.const 92)))
          (then
            (call $store_u8 (local.get $at) (i32.const 92))
            (local.set $at (i64.add (local.get $at) (i64.const 1)))))
        (call $store_u8 (local.get $at) (local.get $b))
        (local.set $at (i64.add (local.get $at) (i64.const 1)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $next)))
    (local.set $at (call $copy (local.get $at) (i32.const 768) (i32.const 20)))
    (call $output_set (local.get $out) (i64.sub (local.get $at) (local.get $out)))
    (i32.const 0))
)
