//! Why joining or separating accounts failed: the store, or a [`Refusal`] whose text is the
//! reply to the person.

use antler_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// Why a link or unlink was not made; the text is the reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "That code is not valid. Check it, or send /link from your other account for a new one."
    )]
    UnknownCode,
    #[error(
        "That code has expired (codes last 10 minutes). Send /link from your other account for a new one."
    )]
    ExpiredCode,
    #[error(
        "That code was already used; each code works once. Send /link from your other account for a new one."
    )]
    UsedCode,
    #[error(
        "That code was issued for your own user ({user_id}). Use it from the other account you want to link."
    )]
    OwnCode { user_id: String },
    #[error("Too many wrong codes from this account. Try again in {minutes} min.")]
    RateLimited { minutes: u64 },
    #[error(
        "This account is set up as {user_id} by the administrator (identities in the config), so it cannot be linked or unlinked here."
    )]
    Provisioned { user_id: String },
    #[error(
        "This account is already linked to {user_id}. Send /unlink first to link it to someone else."
    )]
    AlreadyLinked { user_id: String },
    #[error(
        "This account is an admin ({user_id}) and would lose that by joining another user. Send /link here instead and use the code from your other account."
    )]
    AdminJoining { user_id: String },
    #[error("This account is not linked: it is its own user, {user_id}.")]
    NotLinked { user_id: String },
    /// Group conversations' owners (`chat-…`) are no person: no account may act as one.
    #[error(
        "{user_id} is a group conversation's owner, not a person: link accounts to a person's user id."
    )]
    ConversationOwner { user_id: String },
    #[error("{account} already is {user_id}: nothing to link.")]
    SameUser { account: String, user_id: String },
}
