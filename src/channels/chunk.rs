//! Splitting a long answer into platform-sized messages: the splitter lives in the channel
//! contract crate so adapters whose markup grows a text (Discord's mention escaping) can split
//! the same way.

pub use antler_channel::split_message;
